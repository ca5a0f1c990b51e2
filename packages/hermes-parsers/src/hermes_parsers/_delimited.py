"""``DelimitedParser``: parse, render and stream any format described by a ``FormatSpec``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn, ToolParseError

from hermes_parsers._schemas import schemas_from_tools
from hermes_parsers._spec import BodyError, FormatSpec, Schemas
from hermes_parsers._stream import CompiledSpec, DelimitedStream, decode_safely
from hermes_parsers._template_json import FastParse, template_json_parser
from hermes_parsers.errors import RenderError


class DelimitedParser:
    """A ``ToolCallParser`` for a marker-delimited format.

    ``reasoning_open=True`` is for prompts that already opened the reasoning block (templates
    that end the prompt with ``<think>``): the output then starts inside reasoning.
    ``stream_batch``: a stream examines new text once at least this many characters are
    queued (or at ``finish``), which keeps per-chunk overhead low when chunks are a few
    characters; use 1 for events after every chunk.
    """

    def __init__(
        self, spec: FormatSpec, *, reasoning_open: bool = False, stream_batch: int = 256
    ) -> None:
        self._stream_batch = max(1, stream_batch)
        self._simple = spec.section is None and spec.call_end is not None and not reasoning_open
        if reasoning_open and spec.reasoning is None:
            raise RenderError(f"format {spec.name!r} has no reasoning block to start inside")
        self._spec = spec
        self._compiled = CompiledSpec(spec)
        self._reasoning_open = reasoning_open
        self._fast: FastParse | None = (
            template_json_parser(spec) if spec.template_json and self._simple else None
        )

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def spec(self) -> FormatSpec:
        return self._spec

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> DelimitedStream:
        return DelimitedStream(
            self._spec,
            self._compiled,
            schemas_from_tools(tools),
            reasoning_open=self._reasoning_open,
            batch=self._stream_batch,
        )

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        if self._fast is not None:  # template-JSON formats do not read tool schemas
            turn = self._fast(text)
            if turn is not None:
                return turn
        schemas = schemas_from_tools(tools)
        if self._simple:
            fast = self._parse_simple(text, schemas)
            if fast is not None:
                return fast
        stream = DelimitedStream(
            self._spec, self._compiled, schemas, reasoning_open=self._reasoning_open
        )
        stream.feed(text)
        return stream.finish()[1]

    def _parse_simple(self, text: str, schemas: Schemas) -> ParsedTurn | None:
        """One-shot path for the common shape (an optional leading reasoning block, content,
        then closed calls separated by whitespace, no section); None sends the text to the
        state machine. The property tests check both paths agree on every input they make."""
        spec = self._spec
        start, end = spec.call_start, spec.call_end
        assert end is not None
        reasoning: str | None = None
        base = 0
        if spec.reasoning is not None and spec.reasoning[0] in text:
            opener, closer = spec.reasoning
            close_at = text.find(closer, len(opener))
            if not text.startswith(opener) or close_at < 0:
                return None
            reasoning = text[len(opener) : close_at]
            pad = spec.reasoning_pad
            if pad and reasoning.startswith(pad):
                reasoning = reasoning[len(pad) :]
            if pad and reasoning.endswith(pad):
                reasoning = reasoning[: -len(pad)]
            base = close_at + len(closer)
            if spec.reasoning_after and text.startswith(spec.reasoning_after, base):
                base += len(spec.reasoning_after)
            if text.find(opener, base) >= 0:
                return None
        at = text.find(start, base)
        if at < 0:
            return ParsedTurn(content=text[base:] or None, reasoning=reasoning)
        content = text[base:at]
        sep = spec.content_sep
        if sep and content.endswith(sep):
            content = content[: -len(sep)]
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        while at >= 0:
            body_at = at + len(start)
            close = text.find(end, body_at)
            if close < 0:
                return None
            body = text[body_at:close]
            close += len(end)
            items = decode_safely(spec, body, len(calls) + len(errors), schemas)
            # A body that decoded as one JSON value ends outside any string: its closing
            # marker is real. Otherwise check, as the state machine does.
            decoded = bool(items) and all(isinstance(i, ParsedToolCall) for i in items)
            if spec.json_aware and not decoded and not _quotes_balanced(body):
                return None
            for item in items or [BodyError("malformed_call", "empty tool call")]:
                index = len(calls) + len(errors)
                if isinstance(item, BodyError):
                    errors.append(
                        ToolParseError(item.kind, item.message, index, at, close, item.name, body)
                    )
                else:
                    calls.append(item)
            at = text.find(start, close)
            gap = text[close : len(text) if at < 0 else at]
            if gap and not gap.isspace():
                return None
        return ParsedTurn(
            content=content or None, reasoning=reasoning, tool_calls=calls, errors=errors
        )

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        spec = self._spec
        parts: list[str] = []
        if reasoning is not None:
            if spec.reasoning is None:
                raise RenderError(f"format {spec.name!r} cannot carry reasoning")
            opener, close = spec.reasoning
            if close in reasoning:
                raise RenderError(f"reasoning contains the closing marker {close!r}")
            if self._reasoning_open:
                parts += [reasoning, spec.reasoning_pad, close, spec.reasoning_after]
            else:
                pad = spec.reasoning_pad
                parts += [opener, pad, reasoning, pad, close, spec.reasoning_after]
        elif self._reasoning_open:
            raise RenderError("this parser expects output to start inside reasoning")
        if content:
            for marker in spec.content_markers:
                if marker in content:
                    raise RenderError(
                        f"content contains {marker!r}, which {spec.name} reads as markup"
                    )
            parts.append(content)
        if tool_calls:
            if content:
                parts.append(spec.content_sep)
            parts.append(spec.render_calls(tool_calls))
        return "".join(parts)


def _quotes_balanced(body: str) -> bool:
    """True when ``body`` ends outside any JSON string (so its closing marker is real)."""
    if "\\" in body:
        body = body.replace("\\\\", "")
        if body.endswith("\\"):
            return False
        return (body.count('"') - body.count('\\"')) % 2 == 0
    return body.count('"') % 2 == 0
