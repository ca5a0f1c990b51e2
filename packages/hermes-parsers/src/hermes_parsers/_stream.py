"""Incremental state machine for delimited formats.

Every character is examined a bounded number of times: unfinished text kept between chunks is
at most one marker long (or a run of whitespace whose fate is not yet known), call bodies are
collected in a list and JSON string state is carried across chunks. ``parse`` is this machine fed
the whole text at once, so the result cannot depend on how the text was split.
"""

from __future__ import annotations

from typing import Final

from hermes_protocols.parsing import (
    ContentDelta,
    ParsedToolCall,
    ParsedTurn,
    ParseErrorEvent,
    ParseEvent,
    ReasoningDelta,
    ToolArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolParseError,
)

from hermes_parsers._spec import (
    BodyError,
    Decoded,
    FormatSpec,
    Schemas,
    alternation,
    first_chars,
    partial_tail,
    prefixes,
)

CONTENT: Final = 0
REASONING: Final = 1
AFTER_REASONING: Final = 2
SECTION: Final = 3
CALL: Final = 4


def decode_safely(spec: FormatSpec, body: str, index: int, schemas: Schemas) -> list[Decoded]:
    """``spec.decode``, with pathological nesting reported instead of raised."""
    try:
        return spec.decode(body, index, schemas)
    except RecursionError:
        return [BodyError("malformed_call", "tool call nested too deeply to decode")]


class CompiledSpec:
    """Regexes and prefix sets derived once per spec (held by the parser, shared by streams)."""

    def __init__(self, spec: FormatSpec) -> None:
        self.content_re = alternation(spec.content_markers)
        self.content_prefixes = prefixes(spec.content_markers)
        self.content_firsts = first_chars(spec.content_markers)
        self.section_re = alternation(spec.section_markers)
        self.section_prefixes = prefixes(spec.section_markers)
        self.section_firsts = first_chars(spec.section_markers)
        terms = spec.body_terminators
        self.body_re = alternation(terms)
        self.body_prefixes = prefixes(terms)
        self.body_firsts = first_chars(terms)
        close = spec.reasoning[1] if spec.reasoning else ""
        self.close_prefixes = prefixes((close,)) if close else frozenset()
        self.close_firsts = close[:1]
        self.longest = max(len(m) for m in (*spec.content_markers, *terms, close))


class DelimitedStream:
    """Feed chunks, get events; ``finish`` returns the parsed turn.

    ``feed`` only queues a chunk until ``batch`` characters are waiting, so per-chunk cost is a
    list append and a subtraction; the machine then runs once over the queued text.
    """

    __slots__ = (
        "_after_call",
        "_batch",
        "_body",
        "_c",
        "_call_at",
        "_calls",
        "_content",
        "_errors",
        "_escaped",
        "_events",
        "_in_section",
        "_in_string",
        "_index",
        "_junk",
        "_offset",
        "_pending",
        "_queued",
        "_reasoning",
        "_reasoning_hold",
        "_reasoning_lead",
        "_room",
        "_schemas",
        "_segment",
        "_spec",
        "_state",
    )

    def __init__(
        self,
        spec: FormatSpec,
        compiled: CompiledSpec,
        schemas: Schemas,
        *,
        reasoning_open: bool,
        batch: int = 1,
    ) -> None:
        self._spec = spec
        self._batch = batch
        # None once finished; ``_room``: characters still to queue before the machine runs.
        self._queued: list[str] | None = []
        self._room = batch
        self._c = compiled
        self._schemas = schemas
        self._pending = ""
        self._offset = 0
        self._state = REASONING if reasoning_open else CONTENT
        self._content: list[str] = []
        self._reasoning: list[str] | None = [] if reasoning_open else None
        self._reasoning_lead = not reasoning_open
        self._reasoning_hold = ""
        self._segment = ""
        self._after_call = False
        self._junk = ""
        self._in_section = False
        self._body: list[str] = []
        self._call_at = 0
        self._in_string = False
        self._escaped = False
        self._calls: list[ParsedToolCall] = []
        self._errors: list[ToolParseError] = []
        self._index = 0
        self._events: list[ParseEvent] = []

    # -- public API -------------------------------------------------------------------------

    def feed(self, chunk: str) -> list[ParseEvent]:
        queued = self._queued
        if queued is None:
            raise RuntimeError("feed() after finish(): start a new stream")
        queued.append(chunk)
        self._room -= len(chunk)
        if self._room > 0:
            return []
        self._pending += "".join(queued)
        self._queued, self._room = [], self._batch
        self._run(final=False)
        return self._take_events()

    def finish(self) -> tuple[list[ParseEvent], ParsedTurn]:
        queued = self._queued
        if queued is not None:
            self._queued = None
            self._pending += "".join(queued)
            self._run(final=True)
            self._at_end()
        content = "".join(self._content)
        turn = ParsedTurn(
            content=content or None,
            reasoning=None if self._reasoning is None else "".join(self._reasoning),
            tool_calls=self._calls,
            errors=self._errors,
        )
        return self._take_events(), turn

    # -- driver -----------------------------------------------------------------------------

    def _take_events(self) -> list[ParseEvent]:
        events, self._events = self._events, []
        return events

    def _run(self, *, final: bool) -> None:
        text, i = self._pending, 0
        handlers = (
            self._on_content,
            self._on_reasoning,
            self._on_after_reasoning,
            self._on_section,
            self._on_call,
        )
        while True:
            i, wait = handlers[self._state](text, i, final)
            if wait:
                break
        self._pending = text[i:]
        self._offset += i

    def _at_end(self) -> None:
        if self._state == CONTENT:
            self._end_segment(before_call=False)
        elif self._state == REASONING:
            self._emit_reasoning(self._reasoning_hold)
            self._reasoning_hold = ""
        elif self._state == SECTION:
            self._flush_junk()
        elif self._state == CALL:
            self._unclosed_call()

    # -- content ----------------------------------------------------------------------------

    def _on_content(self, text: str, i: int, final: bool) -> tuple[int, bool]:
        c, spec = self._c, self._spec
        m = c.content_re.search(text, i)
        if m is None:
            keep = (
                0
                if final
                else partial_tail(text, i, c.content_prefixes, c.longest, c.content_firsts)
            )
            self._add_content(text[i : len(text) - keep], hold=not final)
            return len(text) - keep, True
        self._add_content(text[i : m.start()], hold=True)
        marker = m.group()
        if spec.reasoning is not None and marker == spec.reasoning[0]:
            self._end_segment(before_call=False)
            self._state = REASONING
            self._reasoning_lead = True
            if self._reasoning is None:
                self._reasoning = []
        else:
            self._end_segment(before_call=True)
            if spec.section is not None:
                self._state = SECTION
                self._in_section = True
            else:
                self._open_call(self._offset + m.start())
        return m.end(), False

    def _add_content(self, text: str, *, hold: bool) -> None:
        if not text:
            return
        seg = self._segment + text
        if self._after_call:
            if seg.isspace():
                self._segment = seg
                return
            self._after_call = False
        sep = self._spec.content_sep
        cut = len(seg) - len(sep) if hold and sep else len(seg)
        cut = max(cut, 0)
        self._emit_content(seg[:cut])
        self._segment = seg[cut:]

    def _end_segment(self, *, before_call: bool) -> None:
        seg, self._segment = self._segment, ""
        sep = self._spec.content_sep
        if self._after_call and (not seg or seg.isspace()):
            seg = ""
        elif before_call and sep and seg.endswith(sep):
            seg = seg[: -len(sep)]
        self._emit_content(seg)

    def _emit_content(self, text: str) -> None:
        if text:
            self._content.append(text)
            self._events.append(ContentDelta(text))

    # -- reasoning --------------------------------------------------------------------------

    def _on_reasoning(self, text: str, i: int, final: bool) -> tuple[int, bool]:
        spec, c = self._spec, self._c
        assert spec.reasoning is not None
        pad, close = spec.reasoning_pad, spec.reasoning[1]
        if self._reasoning_lead:
            rest = text[i : i + len(pad)]
            if pad and rest == pad:
                i += len(pad)
            elif pad and pad.startswith(rest) and not final:
                return i, True
            self._reasoning_lead = False
        j = text.find(close, i)
        if j < 0:
            keep = (
                0 if final else partial_tail(text, i, c.close_prefixes, len(close), c.close_firsts)
            )
            data = self._reasoning_hold + text[i : len(text) - keep]
            cut = len(data) if final else max(len(data) - len(pad), 0)
            self._emit_reasoning(data[:cut])
            self._reasoning_hold = data[cut:]
            return len(text) - keep, True
        data = self._reasoning_hold + text[i:j]
        self._reasoning_hold = ""
        if pad and data.endswith(pad):
            data = data[: -len(pad)]
        self._emit_reasoning(data)
        self._state = AFTER_REASONING
        return j + len(close), False

    def _emit_reasoning(self, text: str) -> None:
        if text:
            assert self._reasoning is not None
            self._reasoning.append(text)
            self._events.append(ReasoningDelta(text))

    def _on_after_reasoning(self, text: str, i: int, final: bool) -> tuple[int, bool]:
        sep = self._spec.reasoning_after
        rest = text[i : i + len(sep)]
        if sep and rest == sep:
            i += len(sep)
        elif sep and sep.startswith(rest) and not final:
            return i, True
        self._state = CONTENT
        return i, False

    # -- sections ---------------------------------------------------------------------------

    def _on_section(self, text: str, i: int, final: bool) -> tuple[int, bool]:
        c = self._c
        m = c.section_re.search(text, i)
        if m is None:
            keep = (
                0
                if final
                else partial_tail(text, i, c.section_prefixes, c.longest, c.section_firsts)
            )
            self._junk += text[i : len(text) - keep]
            return len(text) - keep, True
        self._junk += text[i : m.start()]
        self._flush_junk()
        if m.group() == self._spec.call_start:
            self._open_call(self._offset + m.start())
        else:
            self._state = CONTENT
            self._in_section = False
            self._after_call = True
        return m.end(), False

    def _flush_junk(self) -> None:
        junk, self._junk = self._junk, ""
        if junk and not junk.isspace():
            self._emit_content(junk)

    # -- calls ------------------------------------------------------------------------------

    def _open_call(self, at: int) -> None:
        self._state = CALL
        self._call_at = at
        self._body = []
        self._in_string = False
        self._escaped = False

    def _on_call(self, text: str, i: int, final: bool) -> tuple[int, bool]:
        c, spec = self._c, self._spec
        start = pos = i
        n = len(text)
        while True:
            m = c.body_re.search(text, pos)
            if m is None:
                keep = (
                    0
                    if final
                    else partial_tail(text, pos, c.body_prefixes, c.longest, c.body_firsts)
                )
                if spec.json_aware:
                    self._track_quotes(text, pos, n - keep)
                self._body.append(text[start : n - keep])
                return n - keep, True
            j = m.start()
            if spec.json_aware:
                self._track_quotes(text, pos, j)
                if self._in_string or self._escaped:
                    # The marker is inside a JSON string (or escaped): it is body text.
                    self._track_quotes(text, j, j + 1)
                    pos = j + 1
                    continue
            self._body.append(text[start:j])
            if spec.call_end is not None:
                self._close_call(self._offset + m.end())
                return m.end(), False
            self._close_call(self._offset + j)
            return j, False

    def _track_quotes(self, text: str, a: int, b: int) -> None:
        """Advance the JSON string state over ``text[a:b]`` (a backslash escapes the next
        character; each segment is examined once, in C string methods)."""
        if a >= b:
            return
        seg = text[a:b]
        if self._escaped:
            seg = seg[1:]
            self._escaped = False
        if "\\" in seg:
            seg = seg.replace("\\\\", "")
            if seg.endswith("\\"):
                self._escaped = True
                seg = seg[:-1]
            quotes = seg.count('"') - seg.count('\\"')
        else:
            quotes = seg.count('"')
        if quotes % 2:
            self._in_string = not self._in_string

    def _close_call(self, end: int) -> None:
        body = "".join(self._body)
        self._body = []
        self._finish_call(body, self._call_at, end)
        if self._in_section:
            self._state = SECTION
        else:
            self._state = CONTENT
            self._after_call = True

    def _finish_call(self, body: str, start: int, end: int) -> None:
        items = decode_safely(self._spec, body, self._index, self._schemas)
        if not items:
            items = [BodyError("malformed_call", "empty tool call")]
        for item in items:
            index = self._index
            self._index += 1
            if isinstance(item, BodyError):
                error = ToolParseError(
                    kind=item.kind,
                    message=item.message,
                    call_index=index,
                    start=start,
                    end=end,
                    name=item.name,
                    raw=body,
                )
                self._errors.append(error)
                self._events.append(ParseErrorEvent(error))
                continue
            self._calls.append(item)
            self._events.append(ToolCallStarted(index, item.name, item.id))
            self._events.append(ToolArgumentsDelta(index, item.raw_arguments))
            self._events.append(ToolCallFinished(index, item))

    def _unclosed_call(self) -> None:
        spec = self._spec
        body = "".join(self._body)
        self._body = []
        if spec.call_end is None:
            self._finish_call(body, self._call_at, self._offset)
            return
        end_at = body.find(spec.call_end) if spec.json_aware else -1
        if end_at < 0:
            index = self._index
            self._index += 1
            error = ToolParseError(
                kind="unclosed_call",
                message=f"tool call opened with {spec.call_start!r} but never closed with "
                f"{spec.call_end!r} before the turn ended",
                call_index=index,
                start=self._call_at,
                end=self._offset,
                raw=body,
            )
            self._errors.append(error)
            self._events.append(ParseErrorEvent(error))
            return
        # A closing marker hidden by an unbalanced quote: close there and re-read the rest.
        base = self._offset - len(body)
        rest = body[end_at + len(spec.call_end) :]
        self._pending, self._offset = rest, base + end_at + len(spec.call_end)
        self._finish_call(body[:end_at], self._call_at, self._offset)
        self._state = SECTION if self._in_section else CONTENT
        self._after_call = not self._in_section
        self._run(final=True)
        self._at_end()
