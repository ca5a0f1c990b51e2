"""What TRL's tool loop needs from the tokenizer: a chat template that renders tool calls and
tool results (``trl.chat_template_utils.supports_tool_calling``) and a response template that
parses the model's tool calls back (``tokenizer.parse_response``). SmolLM2's own template has
neither, so ours (ChatML, tools in the Hermes format) replaces it, and the Hermes ``<tool_call>``
format is parsed with TRL's response template for that format (Qwen's)."""

from __future__ import annotations

from typing import Any

from hermes_rollouts import tools_chat_template
from trl.chat_template_utils import qwen3_template  # type: ignore[import-not-found]


def with_tool_template(tokenizer: Any) -> Any:
    """``tokenizer`` rendering and parsing Hermes-format tool calls (see the module doc)."""
    tokenizer.chat_template = tools_chat_template()
    tokenizer.response_template = qwen3_template
    return tokenizer
