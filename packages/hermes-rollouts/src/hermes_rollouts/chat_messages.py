"""Our messages as the plain dicts a chat template renders, and the ChatML template with tools in
the Hermes format for a model whose own template drops them (SmolLM2's)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from hermes_protocols import Message


def message_dict(message: Message) -> dict[str, Any]:
    """``message`` as a chat template's dict (tool-call arguments as objects)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "type": "function",
                "function": {"name": call.name, "arguments": json.loads(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.name is not None:
        out["name"] = message.name
    return out


def tools_chat_template() -> str:
    """ChatML with the tools in the Hermes format (``<tool_call>`` JSON), as our token mode's
    fallback renders them."""
    return resources.files("hermes_rollouts").joinpath("data/chatml-tools.jinja").read_text()
