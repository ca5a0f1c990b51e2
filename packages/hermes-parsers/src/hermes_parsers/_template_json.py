"""One-shot fast path for ``<tag>\\n{"name": N, "arguments": A}\\n</tag>`` formats.

It reads only the exact layout chat templates write (optional leading reasoning block, content,
closed calls separated by whitespace) with ``str`` searches in C and one JSON scan per value, and
returns None for anything else so the caller falls back to the general parser. It returns the
same ``ParsedTurn`` the state machine would; the property tests check that on every input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn

from hermes_parsers._spec import FormatSpec

# The C scanner behind ``JSONDecoder.raw_decode``, called directly: (text, index) -> (value, end).
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009
_SCAN_ERRORS = (StopIteration, ValueError, RecursionError)

FastParse = Callable[[str], ParsedTurn | None]


def template_json_parser(spec: FormatSpec) -> FastParse:
    """The fast path for ``spec`` (a JSON-bodied format with a closing call marker)."""
    call_start, call_end = spec.call_start, spec.call_end
    if call_end is None or spec.section is not None or spec.reasoning is None:
        raise ValueError(f"format {spec.name!r} does not have the template JSON layout")
    opener = call_start + '\n{"name": '
    middle = ', "arguments": '
    closer = "}\n" + call_end
    n_opener, n_middle, n_closer = len(opener), len(middle), len(closer)
    think, unthink = spec.reasoning
    n_think, n_unthink = len(think), len(unthink)
    pad, after, sep = spec.reasoning_pad, spec.reasoning_after, spec.content_sep
    scan = _SCAN

    def parse(text: str) -> ParsedTurn | None:
        reasoning: str | None = None
        base = 0
        if text.startswith(think):
            close_at = text.find(unthink, n_think)
            if close_at < 0:
                return None
            reasoning = text[n_think:close_at]
            if pad:
                if reasoning.startswith(pad):
                    reasoning = reasoning[len(pad) :]
                if reasoning.endswith(pad):
                    reasoning = reasoning[: -len(pad)]
            base = close_at + n_unthink
            if after and text.startswith(after, base):
                base += len(after)
        at = text.find(call_start, base)
        if text.find(think, base, len(text) if at < 0 else at) >= 0:
            return None  # a second reasoning block: the state machine decides
        if at < 0:
            return ParsedTurn(text[base:] or None, reasoning)
        content = text[base:at]
        if sep and content.endswith(sep):
            content = content[: -len(sep)]
        calls: list[ParsedToolCall] = []
        while True:
            if not text.startswith(opener, at):
                return None
            try:
                name, end = scan(text, at + n_opener)
                if not text.startswith(middle, end):
                    return None
                args_at = end + n_middle
                arguments, end = scan(text, args_at)
            except _SCAN_ERRORS:
                return None
            # A call that decodes as one JSON object ends outside any string, so the closing
            # marker right after it is the one the state machine would stop at.
            if (
                type(name) is not str
                or not name
                or type(arguments) is not dict
                or not text.startswith(closer, end)
            ):
                return None
            calls.append(ParsedToolCall(name, arguments, text[args_at:end]))
            end += n_closer
            at = text.find(call_start, end)
            gap_end = len(text) if at < 0 else at
            if gap_end > end and not text[end:gap_end].isspace():
                return None
            if at < 0:
                return ParsedTurn(content or None, reasoning, calls)

    return parse
