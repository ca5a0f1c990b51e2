"""hermes-loop: the async agent loop, inference backends and the token ledger.

The embedded llama.cpp backend lives in ``hermes_loop.embedded`` and is imported explicitly
(it needs the ``embedded`` extra).
"""

from hermes_loop.chat_template import (
    ChatTemplateError,
    JinjaChatTemplate,
    hermes_tool_call_text,
    hermes_tools_system_prompt,
)
from hermes_loop.hf_tokenizer import HFTokenizer

__all__ = [
    "ChatTemplateError",
    "HFTokenizer",
    "JinjaChatTemplate",
    "hermes_tool_call_text",
    "hermes_tools_system_prompt",
]
