"""Tool-call parsing vocabulary: parsed turns, structured parse errors, streaming events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from hermes_protocols.json_types import JSONObject

ParseErrorKind: TypeAlias = Literal[
    "invalid_json",
    "not_an_object",
    "missing_name",
    "unclosed_call",
    "unknown_parameter_type",
    "malformed_call",
]


@attrs.frozen(slots=True)
class ParsedToolCall:
    """A tool call read from model text.

    ``arguments`` is the decoded object when the model emitted valid arguments, else ``None``
    (and the turn's ``errors`` says why); ``raw_arguments`` is the exact text the model emitted.
    """

    name: str
    arguments: JSONObject | None
    raw_arguments: str
    id: str | None = None


@attrs.frozen(slots=True)
class ToolParseError:
    """A malformed tool call: which call (index in emission order), what is wrong, where.

    ``start``/``end`` are character offsets into the parsed text.
    """

    kind: ParseErrorKind
    message: str
    call_index: int
    start: int
    end: int
    name: str | None = None
    raw: str = ""


def _calls(values: Iterable[ParsedToolCall]) -> tuple[ParsedToolCall, ...]:
    return tuple(values)


def _errors(values: Iterable[ToolParseError]) -> tuple[ToolParseError, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class ParsedTurn:
    """One assistant turn split into content, reasoning, tool calls and parse errors."""

    content: str | None
    reasoning: str | None = None
    tool_calls: tuple[ParsedToolCall, ...] = attrs.field(default=(), converter=_calls)
    errors: tuple[ToolParseError, ...] = attrs.field(default=(), converter=_errors)


@attrs.frozen(slots=True)
class ContentDelta:
    text: str


@attrs.frozen(slots=True)
class ReasoningDelta:
    text: str


@attrs.frozen(slots=True)
class ToolCallStarted:
    index: int
    name: str
    id: str | None = None


@attrs.frozen(slots=True)
class ToolArgumentsDelta:
    index: int
    text: str


@attrs.frozen(slots=True)
class ToolCallFinished:
    index: int
    call: ParsedToolCall


@attrs.frozen(slots=True)
class ParseErrorEvent:
    error: ToolParseError


ParseEvent: TypeAlias = (
    ContentDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolArgumentsDelta
    | ToolCallFinished
    | ParseErrorEvent
)


@runtime_checkable
class StreamingToolCallParser(Protocol):
    """Incremental parser: feed chunks, get events; ``finish`` flushes and returns the result,
    which equals ``parse(full_text)`` however the text was split."""

    def feed(self, chunk: str) -> list[ParseEvent]: ...

    def finish(self) -> tuple[list[ParseEvent], ParsedTurn]: ...


@runtime_checkable
class ToolCallParser(Protocol):
    """Parses and renders one model family's assistant text. ``parse`` never raises."""

    @property
    def name(self) -> str: ...

    def parse(
        self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> ParsedTurn: ...

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str: ...

    def stream(
        self, *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> StreamingToolCallParser: ...
