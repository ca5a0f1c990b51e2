"""Messages <-> the ShareGPT ``conversations`` format that hermes-agent writes.

Layout (one entry per message, ``from``/``value``):

- system -> ``system``, user -> ``human``, tool -> ``tool``, assistant -> ``gpt``;
- a ``gpt`` value joins, with ``\\n``: ``<think>\\n{reasoning}\\n</think>`` (when reasoning is
  set), the content (when non-empty), then one ``<tool_call>\\n{"name": ..., "arguments":
  {...}}\\n</tool_call>`` block per call (arguments as a JSON object);
- a ``tool`` value is ``<tool_response>\\n{"tool_call_id": ..., "name": ..., "content": ...}
  \\n</tool_response>``.

ShareGPT keeps no tool-call ids in ``gpt`` turns; reading back, a call takes the id of the tool
response that answers it (same position among the following tool messages), else
``call_{message}_{index}``. Empty assistant content reads back as ``None``. Values ShareGPT
cannot represent unambiguously (reasoning containing ``</think>``, content containing the tags,
arguments that are not a JSON object) raise :class:`ConversionError` instead of being mangled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hermes_protocols.errors import ConversionError
from hermes_protocols.json_types import JSONObject
from hermes_protocols.messages import Message, ToolCall

_FROM_ROLE = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}
_THINK_OPEN, _THINK_CLOSE = "<think>\n", "\n</think>"
_CALL_OPEN, _CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
_RESP_OPEN, _RESP_CLOSE = "<tool_response>\n", "\n</tool_response>"
_TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _gpt_value(message: Message, index: int) -> str:
    parts: list[str] = []
    if message.reasoning is not None:
        if "</think>" in message.reasoning:
            raise ConversionError(
                f"messages[{index}]: reasoning containing '</think>' cannot be written as ShareGPT"
            )
        parts.append(f"{_THINK_OPEN}{message.reasoning}{_THINK_CLOSE}")
    if message.content:
        if any(tag in message.content for tag in _TAGS):
            raise ConversionError(
                f"messages[{index}]: content containing <think>/<tool_call> "
                "tags cannot be written as ShareGPT unambiguously"
            )
        parts.append(message.content)
    for call in message.tool_calls:
        try:
            arguments = call.parsed_arguments()
        except ConversionError as exc:
            raise ConversionError(f"messages[{index}]: {exc}") from exc
        parts.append(
            f"{_CALL_OPEN}{_dumps({'name': call.name, 'arguments': arguments})}{_CALL_CLOSE}"
        )
    return "\n".join(parts)


def to_sharegpt(messages: Iterable[Message]) -> list[dict[str, str]]:
    """Messages as ShareGPT ``conversations`` entries."""
    out: list[dict[str, str]] = []
    for index, message in enumerate(messages):
        if message.role == "assistant":
            value = _gpt_value(message, index)
        elif message.role == "tool":
            payload = {
                "tool_call_id": message.tool_call_id,
                "name": message.name,
                "content": message.content or "",
            }
            value = f"{_RESP_OPEN}{_dumps(payload)}{_RESP_CLOSE}"
        else:
            value = message.content or ""
        out.append({"from": _FROM_ROLE[message.role], "value": value})
    return out


def _split_calls(value: str, where: str) -> tuple[str, list[JSONObject]]:
    """Split trailing ``<tool_call>`` blocks off a gpt value."""
    calls: list[JSONObject] = []
    rest = value
    while rest.endswith(_CALL_CLOSE):
        start = rest.rfind(_CALL_OPEN)
        if start < 0:
            raise ConversionError(f"{where}: '</tool_call>' without a matching '<tool_call>'")
        body = rest[start + len(_CALL_OPEN) : -len(_CALL_CLOSE)]
        try:
            call = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ConversionError(f"{where}: tool call is not valid JSON: {exc}") from exc
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("arguments"), dict)
        ):
            raise ConversionError(
                f"{where}: a tool call needs a string 'name' and an object 'arguments'"
            )
        calls.append(call)
        rest = rest[:start]
        if rest.endswith("\n"):
            rest = rest[:-1]
        elif rest:
            raise ConversionError(f"{where}: text glued to a <tool_call> block")
    calls.reverse()
    return rest, calls


def _parse_gpt(value: str, where: str) -> tuple[str | None, str | None, list[JSONObject]]:
    reasoning: str | None = None
    rest = value
    if rest.startswith(_THINK_OPEN):
        end = rest.find(_THINK_CLOSE, len(_THINK_OPEN))
        if end < 0:
            raise ConversionError(f"{where}: '<think>' is never closed")
        reasoning = rest[len(_THINK_OPEN) : end]
        rest = rest[end + len(_THINK_CLOSE) :]
        if rest.startswith("\n"):
            rest = rest[1:]
        elif rest:
            raise ConversionError(f"{where}: text glued to '</think>'")
    content, calls = _split_calls(rest, where)
    return (content or None), reasoning, calls


def _parse_tool(value: str, where: str) -> JSONObject:
    if not (value.startswith(_RESP_OPEN) and value.endswith(_RESP_CLOSE)):
        raise ConversionError(f"{where}: a tool value must be wrapped in <tool_response> tags")
    try:
        payload = json.loads(value[len(_RESP_OPEN) : -len(_RESP_CLOSE)])
    except json.JSONDecodeError as exc:
        raise ConversionError(f"{where}: tool response is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("content"), str):
        raise ConversionError(f"{where}: a tool response needs a string 'content'")
    return payload


def from_sharegpt(conversations: Sequence[Mapping[str, Any]]) -> list[Message]:
    """ShareGPT ``conversations`` entries as messages; raises ConversionError if malformed."""
    entries: list[tuple[str, str]] = []
    for index, entry in enumerate(conversations):
        if not isinstance(entry, Mapping):
            raise ConversionError(f"conversations[{index}] must be an object")
        source, value = entry.get("from"), entry.get("value")
        if source not in ("system", "human", "gpt", "tool"):
            raise ConversionError(
                f"conversations[{index}]: 'from' must be system, human, gpt or tool, got {source!r}"
            )
        if not isinstance(value, str):
            raise ConversionError(f"conversations[{index}]: 'value' must be a string")
        entries.append((source, value))
    tool_payloads = {
        i: _parse_tool(v, f"conversations[{i}]") for i, (s, v) in enumerate(entries) if s == "tool"
    }
    messages: list[Message] = []
    for index, (source, value) in enumerate(entries):
        where = f"conversations[{index}]"
        if source == "system":
            messages.append(Message.system(value))
        elif source == "human":
            messages.append(Message.user(value))
        elif source == "tool":
            payload = tool_payloads[index]
            call_id = payload.get("tool_call_id")
            name = payload.get("name")
            messages.append(
                Message.tool(
                    payload["content"],
                    tool_call_id=call_id
                    if isinstance(call_id, str) and call_id
                    else f"call_{index}",
                    name=name if isinstance(name, str) else None,
                )
            )
        else:
            content, reasoning, calls = _parse_gpt(value, where)
            answers = []
            for later in range(index + 1, len(entries)):
                if entries[later][0] != "tool":
                    break
                answers.append(tool_payloads[later])
            tool_calls = []
            for k, call in enumerate(calls):
                answer_id = answers[k].get("tool_call_id") if k < len(answers) else None
                call_id = (
                    answer_id if isinstance(answer_id, str) and answer_id else f"call_{index}_{k}"
                )
                tool_calls.append(
                    ToolCall(id=call_id, name=call["name"], arguments=_dumps(call["arguments"]))
                )
            messages.append(Message.assistant(content, tuple(tool_calls), reasoning))
    return messages
