"""Small codecs shared by the format modules."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._json_spans import JsonSpanError, decode_whole_object
from hermes_parsers._spec import BodyError, Decoded
from hermes_parsers.errors import RenderError


def dumps(value: Any) -> str:
    """JSON the way chat templates write it: ``ensure_ascii=False``, default separators."""
    return json.dumps(value, ensure_ascii=False)


def arguments_text(call: ParsedToolCall) -> str:
    """The JSON text for a call's arguments (the raw text when they never decoded)."""
    if call.arguments is None:
        return call.raw_arguments
    return dumps(call.arguments)


def json_arguments_call(name: str, raw: str, call_id: str | None = None) -> Decoded:
    """A call whose arguments are the JSON object ``raw`` (errors say what is wrong)."""
    try:
        arguments, _ = decode_whole_object(raw)
    except JsonSpanError as exc:
        return BodyError(exc.kind, f"arguments of {name!r}: {exc} (offset {exc.pos})", name)
    return ParsedToolCall(name=name, arguments=arguments, raw_arguments=raw, id=call_id)


def check_text(what: str, value: str, forbidden: Iterable[str], fmt: str) -> None:
    """Refuse ``value`` when it contains a marker the format would read as markup."""
    for marker in forbidden:
        if marker and marker in value:
            raise RenderError(f"{what} {value[:60]!r} contains {marker!r}; {fmt} cannot carry it")


def check_name(name: str, forbidden: Iterable[str], fmt: str) -> None:
    if not name or name != name.strip():
        raise RenderError(f"{fmt}: tool name {name!r} is empty or has surrounding whitespace")
    check_text("tool name", name, forbidden, fmt)
