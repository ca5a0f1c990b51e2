"""Messages and tool schemas <-> OpenAI chat-completions JSON, through a cattrs converter.

Assistant tool calls carry ``arguments`` as a JSON *string* (as the API does); reasoning is
written as ``reasoning_content`` and read from ``reasoning_content`` or ``reasoning``.
Malformed input raises :class:`~hermes_protocols.errors.ConversionError`; nothing is defaulted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cattrs

from hermes_protocols.errors import ConversionError
from hermes_protocols.json_types import JSONObject
from hermes_protocols.messages import ROLES, Message, Role, ToolCall
from hermes_protocols.tools import ToolSchema


def _require_mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversionError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _optional_str(data: Mapping[str, Any], key: str, what: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ConversionError(f"{what}: {key!r} must be a string or null, got {type(value).__name__}")


def _content_text(value: object, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for index, part in enumerate(value):
            part_map = _require_mapping(part, f"{what}: content part {index}")
            if part_map.get("type") != "text" or not isinstance(part_map.get("text"), str):
                raise ConversionError(
                    f"{what}: content part {index} is not a text part; only text content is "
                    "supported"
                )
            texts.append(part_map["text"])
        return "".join(texts)
    raise ConversionError(f"{what}: content must be a string, a list of parts or null")


def _tool_call_from_openai(data: object, what: str) -> ToolCall:
    call = _require_mapping(data, what)
    if call.get("type", "function") != "function":
        raise ConversionError(f"{what}: only function tool calls are supported")
    function = _require_mapping(call.get("function"), f"{what}.function")
    call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
    if not isinstance(call_id, str) or not call_id:
        raise ConversionError(f"{what}: 'id' must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise ConversionError(f"{what}: function 'name' must be a non-empty string")
    if not isinstance(arguments, str):
        raise ConversionError(
            f"{what}: function 'arguments' must be a JSON string (as the OpenAI API sends it), "
            f"got {type(arguments).__name__}"
        )
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _structure_message(data: object, _type: object) -> Message:
    raw = _require_mapping(data, "message")
    role = raw.get("role")
    if role not in ROLES:
        raise ConversionError(f"message role must be one of {ROLES}, got {role!r}")
    what = f"{role} message"
    tool_calls_raw = raw.get("tool_calls") or []
    if not isinstance(tool_calls_raw, list):
        raise ConversionError(f"{what}: 'tool_calls' must be a list")
    reasoning = _optional_str(raw, "reasoning_content", what)
    if reasoning is None:
        reasoning = _optional_str(raw, "reasoning", what)
    valid_role: Role = role
    return Message(
        role=valid_role,
        content=_content_text(raw.get("content"), what),
        tool_calls=tuple(
            _tool_call_from_openai(c, f"{what}: tool_calls[{i}]")
            for i, c in enumerate(tool_calls_raw)
        ),
        tool_call_id=_optional_str(raw, "tool_call_id", what),
        name=_optional_str(raw, "name", what),
        reasoning=reasoning,
    )


def _unstructure_message(message: Message) -> JSONObject:
    out: JSONObject = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.reasoning is not None:
        out["reasoning_content"] = message.reasoning
    return out


def _structure_tool(data: object, _type: object) -> ToolSchema:
    raw = _require_mapping(data, "tool")
    if raw.get("type", "function") != "function":
        raise ConversionError("tool: only function tools are supported")
    function = _require_mapping(raw.get("function"), "tool.function")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ConversionError("tool.function: 'name' must be a non-empty string")
    description = function.get("description", "")
    if not isinstance(description, str):
        raise ConversionError(f"tool {name!r}: 'description' must be a string")
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    return ToolSchema(
        name=name,
        description=description,
        parameters=dict(_require_mapping(parameters, f"tool {name!r}: parameters")),
    )


def _unstructure_tool(tool: ToolSchema) -> JSONObject:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _build_converter() -> cattrs.Converter:
    converter = cattrs.Converter()
    converter.register_structure_hook(Message, _structure_message)
    converter.register_unstructure_hook(Message, _unstructure_message)
    converter.register_structure_hook(ToolSchema, _structure_tool)
    converter.register_unstructure_hook(ToolSchema, _unstructure_tool)
    return converter


_CONVERTER = _build_converter()


def message_to_openai(message: Message) -> JSONObject:
    """One message as OpenAI chat JSON."""
    result: JSONObject = _CONVERTER.unstructure(message, Message)
    return result


def message_from_openai(data: Mapping[str, Any]) -> Message:
    """One OpenAI chat JSON message as a :class:`Message`; raises ConversionError if malformed."""
    return _CONVERTER.structure(data, Message)


def messages_to_openai(messages: Iterable[Message]) -> list[JSONObject]:
    return [message_to_openai(m) for m in messages]


def messages_from_openai(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    if not isinstance(data, list | tuple):
        raise ConversionError("messages must be a JSON list of message objects")
    out: list[Message] = []
    for index, item in enumerate(data):
        try:
            out.append(message_from_openai(item))
        except ConversionError as exc:
            raise ConversionError(f"messages[{index}]: {exc}") from exc
    return out


def tools_to_openai(tools: Iterable[ToolSchema]) -> list[JSONObject]:
    return [_CONVERTER.unstructure(t, ToolSchema) for t in tools]


def tools_from_openai(data: Sequence[Mapping[str, Any]]) -> list[ToolSchema]:
    return [_CONVERTER.structure(t, ToolSchema) for t in data]
