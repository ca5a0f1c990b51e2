"""The description of a delimited tool-call format, shared by its parser and its renderer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols.parsing import ParsedToolCall, ParseErrorKind

Schemas = Mapping[str, Mapping[str, Any]]
"""Tool name -> JSON schema of its parameters (``properties`` is what typed formats read)."""


@attrs.frozen(slots=True)
class BodyError:
    """A call body that could not be decoded (turned into a ``ToolParseError`` by the engine)."""

    kind: ParseErrorKind
    message: str
    name: str | None = None


Decoded = ParsedToolCall | BodyError
DecodeBody = Callable[[str, int, Schemas], list[Decoded]]
"""(body text, index of the first call in it, schemas) -> the calls or errors it holds."""
RenderCalls = Callable[[Sequence[ParsedToolCall]], str]


@attrs.frozen(slots=True)
class FormatSpec:
    """Markers and codecs of one delimited format.

    Text is content until ``reasoning[0]`` (reasoning until ``reasoning[1]``), or until a call
    opens: ``call_start`` directly, or ``section[0]`` then calls until ``section[1]``. A call body
    runs to ``call_end``; with ``call_end=None`` it runs to the next call, the section end or the
    end of the text. ``json_aware`` bodies ignore markers inside JSON string literals.
    ``template_json``: calls are ``call_start\\n{"name": N, "arguments": A}\\ncall_end`` in
    the chat template, and ``parse`` tries that exact layout on a fast path first.
    """

    name: str
    call_start: str
    call_end: str | None
    decode: DecodeBody
    render_calls: RenderCalls
    json_aware: bool = False
    section: tuple[str, str | None] | None = None
    reasoning: tuple[str, str] | None = ("<think>", "</think>")
    reasoning_pad: str = ""
    reasoning_after: str = ""
    content_sep: str = ""
    template_json: bool = False

    @property
    def content_markers(self) -> tuple[str, ...]:
        opener = self.section[0] if self.section else self.call_start
        return (opener, self.reasoning[0]) if self.reasoning else (opener,)

    @property
    def section_markers(self) -> tuple[str, ...]:
        end = self.section[1] if self.section else None
        return (self.call_start, end) if end else (self.call_start,)

    @property
    def body_terminators(self) -> tuple[str, ...]:
        if self.call_end is not None:
            return (self.call_end,)
        return self.section_markers if self.section else (self.call_start,)


def alternation(markers: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))


def prefixes(markers: Sequence[str]) -> frozenset[str]:
    return frozenset(m[:k] for m in markers for k in range(1, len(m)))


def partial_tail(
    text: str, start: int, prefix_set: frozenset[str], longest: int, firsts: str = ""
) -> int:
    """Length of the longest suffix of ``text[start:]`` that could begin a marker.

    ``firsts``: the markers' first characters (every prefix starts with one); with them only
    the suffixes starting at one of those characters in the last ``longest`` are tried.
    """
    if not firsts:
        for k in range(min(longest, len(text) - start), 0, -1):
            if text[len(text) - k :] in prefix_set:
                return k
        return 0
    window = max(start, len(text) - longest)
    hit = len(text)
    for first in firsts:
        pos = text.find(first, window, hit)
        while pos >= 0:
            if text[pos:] in prefix_set:
                hit = pos
                break
            pos = text.find(first, pos + 1, hit)
    return len(text) - hit


def first_chars(markers: Sequence[str]) -> str:
    return "".join(sorted({m[0] for m in markers if m}))
