"""Decode JSON objects while keeping the exact source text of each top-level value."""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_protocols.parsing import ParseErrorKind

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonSpanError(ValueError):
    """The text is not the JSON that was expected; ``pos`` is where decoding stopped."""

    def __init__(self, message: str, pos: int, kind: ParseErrorKind = "invalid_json") -> None:
        super().__init__(message)
        self.pos = pos
        self.kind = kind


def skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def decode_value(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value starting exactly at ``pos``; return it and its end offset."""
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise JsonSpanError(f"invalid JSON: {exc.msg}", exc.pos) from None
    except RecursionError:
        raise JsonSpanError("JSON nested too deeply to decode", pos) from None


def decode_object(text: str, pos: int) -> tuple[dict[str, Any], dict[str, tuple[int, int]], int]:
    """Decode the object at ``pos``: its value, each key's value span, and its end offset."""
    if not text.startswith("{", pos):
        raise JsonSpanError("expected a JSON object", pos)
    obj: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    i = skip_ws(text, pos + 1)
    if text.startswith("}", i):
        return obj, spans, i + 1
    while True:
        if not text.startswith('"', i):
            raise JsonSpanError("invalid JSON: expected a string key", i)
        key, i = decode_value(text, i)
        i = skip_ws(text, i)
        if not text.startswith(":", i):
            raise JsonSpanError("invalid JSON: expected ':' after a key", i)
        i = skip_ws(text, i + 1)
        value, end = decode_value(text, i)
        obj[key] = value
        spans[key] = (i, end)
        i = skip_ws(text, end)
        if text.startswith(",", i):
            i = skip_ws(text, i + 1)
        elif text.startswith("}", i):
            return obj, spans, i + 1
        else:
            raise JsonSpanError("invalid JSON: expected ',' or '}'", i)


def decode_whole_object(text: str) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """Decode ``text`` as exactly one object (surrounding whitespace allowed)."""
    start = skip_ws(text, 0)
    if start == len(text):
        raise JsonSpanError("empty: expected a JSON object", start)
    if text[start] != "{":
        decode_value(text, start)
        raise JsonSpanError("arguments are JSON but not an object", start, "not_an_object")
    obj, spans, end = decode_object(text, start)
    tail = skip_ws(text, end)
    if tail != len(text):
        raise JsonSpanError("extra text after the JSON object", tail)
    return obj, spans
