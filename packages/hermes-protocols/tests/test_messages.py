from __future__ import annotations

import pytest
from hermes_protocols import ConversionError, Message, ToolCall


def test_tool_message_requires_call_id() -> None:
    with pytest.raises(ConversionError, match="tool_call_id"):
        Message(role="tool", content="x")


def test_only_assistant_carries_tool_calls() -> None:
    with pytest.raises(ConversionError, match="only assistant"):
        Message(role="user", content="x", tool_calls=(ToolCall("a", "f", "{}"),))


def test_unknown_role_rejected() -> None:
    with pytest.raises(ConversionError, match="unknown role"):
        Message(role="robot", content="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "match"),
    [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"), ("", "not valid JSON")],
)
def test_parsed_arguments_never_defaults(arguments: str, match: str) -> None:
    with pytest.raises(ConversionError, match=match):
        ToolCall("c1", "f", arguments).parsed_arguments()


def test_parsed_arguments_keeps_types() -> None:
    call = ToolCall("c1", "f", '{"n": "42", "m": 42, "x": null}')
    assert call.parsed_arguments() == {"n": "42", "m": 42, "x": None}
