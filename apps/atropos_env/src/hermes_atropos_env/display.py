"""Readable rollout text for wandb tables and logs: reasoning, tool calls and tool results
shown as such instead of a raw token decode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} chars cut]"


def format_rollout(messages: Sequence[Mapping[str, Any]], *, limit: int = 2000) -> str:
    """One conversation (OpenAI message JSON) as labelled blocks."""
    parts: list[str] = []
    for message in messages:
        role = str(message.get("role", "?"))
        content = message.get("content") or ""
        if role == "assistant":
            reasoning = message.get("reasoning_content") or ""
            if reasoning:
                parts.append(f"[ASSISTANT reasoning]\n{_clip(reasoning, limit)}")
            if content:
                parts.append(f"[ASSISTANT]\n{_clip(content, limit)}")
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                arguments = _clip(str(function.get("arguments", "")), limit)
                parts.append(
                    f"[TOOL CALL {call.get('id', '')}] {function.get('name')}({arguments})"
                )
        elif role == "tool":
            parts.append(
                f"[TOOL RESULT {message.get('tool_call_id', '')}]\n{_clip(content, limit)}"
            )
        else:
            parts.append(f"[{role.upper()}]\n{_clip(content, limit)}")
    return "\n\n".join(parts)
