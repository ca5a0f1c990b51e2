"""Shared helpers for the hermes-parsers tests (exposed as fixtures)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hermes_protocols.parsing import (
    ContentDelta,
    ParsedTurn,
    ParseErrorEvent,
    ParseEvent,
    ReasoningDelta,
    StreamingToolCallParser,
    ToolCallFinished,
)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: booleans are not numbers, 1 == 1.0, containers recurse."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def schema_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def tools_for(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """OpenAI tool dicts whose parameter types are those of the given arguments."""
    tools: dict[str, dict[str, Any]] = {}
    for name, arguments in calls:
        props = tools.setdefault(name, {})
        for key, value in arguments.items():
            props.setdefault(key, {"type": schema_type(value)})
    return [
        {
            "type": "function",
            "function": {"name": n, "parameters": {"type": "object", "properties": p}},
        }
        for n, p in tools.items()
    ]


def run_stream(stream: StreamingToolCallParser, chunks: list[str]) -> ParsedTurn:
    """Feed ``chunks``; check the events agree with the final turn; return the turn."""
    events: list[ParseEvent] = []
    for chunk in chunks:
        events += stream.feed(chunk)
    tail, turn = stream.finish()
    events += tail
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert content == (turn.content or "")
    assert reasoning == (turn.reasoning or "")
    assert [e.call for e in events if isinstance(e, ToolCallFinished)] == list(turn.tool_calls)
    assert [e.error for e in events if isinstance(e, ParseErrorEvent)] == list(turn.errors)
    return turn


@pytest.fixture(scope="session")
def json_eq() -> Callable[[Any, Any], bool]:
    return json_equal


@pytest.fixture(scope="session")
def tools_from() -> Callable[[list[tuple[str, dict[str, Any]]]], list[dict[str, Any]]]:
    return tools_for


@pytest.fixture(scope="session")
def stream_turn() -> Callable[[StreamingToolCallParser, list[str]], ParsedTurn]:
    return run_stream
