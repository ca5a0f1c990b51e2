from __future__ import annotations

import json
from typing import Any

import pytest
from hermes_protocols import ConversionError, Message, ToolCall
from hermes_protocols.convert import from_sharegpt, to_sharegpt
from hermes_protocols.strategies import identifiers, json_objects, messages
from hypothesis import assume, given, settings
from hypothesis import strategies as st

_TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")


def _representable(message: Message) -> bool:
    texts = [message.content or "", message.reasoning or ""]
    return not any(tag in text for text in texts for tag in _TAGS)


def _normalized(message: Message) -> tuple[object, ...]:
    """What ShareGPT keeps: ids are checked separately, empty assistant content is None."""
    content = message.content
    if message.role == "assistant" and not content:
        content = None
    if message.role in ("system", "user", "tool") and content is None:
        content = ""
    calls = tuple((c.name, c.parsed_arguments()) for c in message.tool_calls)
    return (message.role, content, calls, message.reasoning, message.tool_call_id, message.name)


@settings(max_examples=3 * settings.default.max_examples)  # 300; 30 with dev
@given(st.lists(messages, max_size=8))
def test_round_trip(msgs: list[Message]) -> None:
    assume(all(_representable(m) for m in msgs))
    conversations = json.loads(json.dumps(to_sharegpt(msgs)))
    back = from_sharegpt(conversations)
    assert [_normalized(m) for m in back] == [_normalized(m) for m in msgs]
    assert to_sharegpt(back) == conversations


@given(st.lists(st.tuples(identifiers, identifiers, json_objects), min_size=1, max_size=4))
def test_call_ids_follow_their_tool_responses(calls: list[tuple[str, str, dict[str, Any]]]) -> None:
    tool_calls = tuple(ToolCall(i, n, json.dumps(a)) for i, n, a in calls)
    msgs = [Message.user("go"), Message.assistant(None, tool_calls)]
    msgs += [Message.tool("ok", call_id, name) for call_id, name, _ in calls]
    back = from_sharegpt(to_sharegpt(msgs))
    assert [c.id for c in back[1].tool_calls] == [c.id for c in tool_calls]


def test_hermes_agent_shape() -> None:
    msgs = [
        Message.system("sys"),
        Message.user("hi"),
        Message.assistant("look", (ToolCall("c1", "terminal", '{"command": "ls"}'),), "hmm"),
        Message.tool("a b", "c1", "terminal"),
        Message.assistant("done"),
    ]
    assert to_sharegpt(msgs) == [
        {"from": "system", "value": "sys"},
        {"from": "human", "value": "hi"},
        {
            "from": "gpt",
            "value": '<think>\nhmm\n</think>\nlook\n<tool_call>\n{"name": "terminal", '
            '"arguments": {"command": "ls"}}\n</tool_call>',
        },
        {
            "from": "tool",
            "value": '<tool_response>\n{"tool_call_id": "c1", "name": "terminal", '
            '"content": "a b"}\n</tool_response>',
        },
        {"from": "gpt", "value": "done"},
    ]


@pytest.mark.parametrize(
    "message",
    [
        Message.assistant("x", (), "has </think> inside"),
        Message.assistant("content <tool_call> inside"),
        Message.assistant(None, (ToolCall("c", "f", "{broken"),)),
        Message.assistant(None, (ToolCall("c", "f", "[1]"),)),
    ],
)
def test_unrepresentable_messages_refused(message: Message) -> None:
    with pytest.raises(ConversionError):
        to_sharegpt([message])


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"from": "bot", "value": "x"}, "'from'"),
        ({"from": "human"}, "'value'"),
        ({"from": "tool", "value": "plain"}, "tool_response"),
        ({"from": "tool", "value": "<tool_response>\n{oops\n</tool_response>"}, "valid JSON"),
        ({"from": "tool", "value": '<tool_response>\n{"x": 1}\n</tool_response>'}, "content"),
        ({"from": "gpt", "value": "<tool_call>\n{oops\n</tool_call>"}, "valid JSON"),
        ({"from": "gpt", "value": '<tool_call>\n{"name": "f"}\n</tool_call>'}, "arguments"),
        ({"from": "gpt", "value": "<think>\nnever closed"}, "never closed"),
        ({"from": "gpt", "value": "x\n</tool_call>"}, "without a matching"),
    ],
)
def test_malformed_sharegpt_raises(entry: dict[str, Any], match: str) -> None:
    with pytest.raises(ConversionError, match=match):
        from_sharegpt([entry])
