from __future__ import annotations

import json
from typing import Any

import pytest
from hermes_protocols import ConversionError, Message, ToolSchema
from hermes_protocols.convert import (
    message_from_openai,
    message_to_openai,
    messages_from_openai,
    messages_to_openai,
    tools_from_openai,
    tools_to_openai,
)
from hermes_protocols.strategies import json_objects, messages, texts
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=3 * settings.default.max_examples)  # 300; 30 with dev
@given(st.lists(messages, max_size=8))
def test_round_trip_messages(msgs: list[Message]) -> None:
    wire = messages_to_openai(msgs)
    assert messages_from_openai(json.loads(json.dumps(wire))) == msgs


@given(messages)
def test_wire_shape(message: Message) -> None:
    wire = message_to_openai(message)
    assert wire["role"] == message.role
    for call, out in zip(message.tool_calls, wire.get("tool_calls", []), strict=True):
        assert out["type"] == "function"
        assert isinstance(out["function"]["arguments"], str)
        assert json.loads(out["function"]["arguments"]) == call.parsed_arguments()
    if message.reasoning is not None:
        assert wire["reasoning_content"] == message.reasoning


@given(texts, json_objects)
def test_tool_schema_round_trip(description: str, properties: dict[str, Any]) -> None:
    tool = ToolSchema("f", description, {"type": "object", "properties": properties})
    assert tools_from_openai(tools_to_openai([tool])) == [tool]


def test_reasoning_read_from_either_key() -> None:
    a = message_from_openai({"role": "assistant", "content": "x", "reasoning": "r"})
    b = message_from_openai({"role": "assistant", "content": "x", "reasoning_content": "r"})
    assert a.reasoning == b.reasoning == "r"


def test_text_parts_are_joined() -> None:
    msg = message_from_openai(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    )
    assert msg.content == "ab"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"role": "robot", "content": "x"}, "role"),
        ({"content": "x"}, "role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": 3}, "content"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "text part"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
            },
            "JSON string",
        ),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            "'id'",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]},
            "name",
        ),
        ({"role": "assistant", "tool_calls": "nope"}, "list"),
        ({"role": "user", "content": "x", "name": 5}, "'name'"),
    ],
)
def test_malformed_messages_raise(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConversionError, match=match):
        message_from_openai(data)


def test_malformed_list_names_the_index() -> None:
    with pytest.raises(ConversionError, match=r"messages\[1\]"):
        messages_from_openai([{"role": "user", "content": "ok"}, {"role": "nope"}])
    with pytest.raises(ConversionError, match="list"):
        messages_from_openai("not a list")  # type: ignore[arg-type]
