"""Streaming for formats decided by the whole output (bare JSON, Python calls, harmony).

Chunks are collected in a list and parsed once at ``finish``; content streams eagerly as soon
as the start of the text rules tool calls out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hermes_protocols.parsing import (
    ContentDelta,
    ParsedTurn,
    ParseErrorEvent,
    ParseEvent,
    ReasoningDelta,
    ToolArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolParseError,
)

from hermes_parsers._schemas import schemas_from_tools
from hermes_parsers._spec import Schemas

Decide = Callable[[str], bool | None]
"""Given the text so far: True when it can only be plain content, False when it may hold
tool calls, None when more text is needed to tell."""


def turn_events(turn: ParsedTurn, *, with_content: bool = True) -> list[ParseEvent]:
    """The events a parsed turn would have produced, calls and errors in emission order."""
    events: list[ParseEvent] = []
    if turn.reasoning:
        events.append(ReasoningDelta(turn.reasoning))
    if with_content and turn.content:
        events.append(ContentDelta(turn.content))
    calls = iter(turn.tool_calls)
    error_at = {e.call_index: e for e in turn.errors}
    for index in range(len(turn.tool_calls) + len(turn.errors)):
        if index in error_at:
            events.append(ParseErrorEvent(error_at[index]))
            continue
        call = next(calls)
        events.append(ToolCallStarted(index, call.name, call.id))
        events.append(ToolArgumentsDelta(index, call.raw_arguments))
        events.append(ToolCallFinished(index, call))
    return events


class BufferedStream:
    def __init__(self, parse: Callable[[str], ParsedTurn], decide: Decide) -> None:
        self._parse = parse
        self._decide = decide
        self._chunks: list[str] = []
        self._plain: bool | None = None
        self._head = ""
        self._done = False

    def feed(self, chunk: str) -> list[ParseEvent]:
        if self._done:
            raise RuntimeError("feed() after finish(): start a new stream")
        self._chunks.append(chunk)
        if self._plain is None:
            self._head += chunk
            self._plain = self._decide(self._head)
            if self._plain:
                return [ContentDelta(self._head)] if self._head else []
            return []
        if self._plain and chunk:
            return [ContentDelta(chunk)]
        return []

    def finish(self) -> tuple[list[ParseEvent], ParsedTurn]:
        self._done = True
        turn = self._parse("".join(self._chunks))
        return turn_events(turn, with_content=not self._plain), turn


class BufferedParser:
    """Base for whole-output formats: subclasses define ``name``, ``_parse``, ``_decide`` and
    ``render``."""

    name: str

    def _parse(self, text: str, schemas: Schemas) -> ParsedTurn:
        raise NotImplementedError

    def _decide(self, head: str) -> bool | None:
        raise NotImplementedError

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        try:
            return self._parse(text, schemas_from_tools(tools))
        except RecursionError:
            error = ToolParseError(
                kind="malformed_call",
                message="tool call nesting too deep to decode",
                call_index=0,
                start=0,
                end=len(text),
                raw=text,
            )
            return ParsedTurn(content=None, errors=(error,))

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> BufferedStream:
        return BufferedStream(lambda text: self.parse(text, tools=tools), self._decide)
