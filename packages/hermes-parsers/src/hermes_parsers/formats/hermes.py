"""Hermes 2 Pro/3/4 and Qwen 2.5/3 (``<tool_call>\\n{"name": F, "arguments": {..}}\\n</tool_call>``)
and LongCat Flash (the same JSON inside ``<longcat_tool_call>`` tags)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._json_spans import JsonSpanError, decode_whole_object
from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.formats._common import arguments_text, check_name, dumps

_DECODER = json.JSONDecoder()
# The C scanner behind ``raw_decode``, called directly: (text, index) -> (value, end).
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(_DECODER, "scan_once")  # noqa: B009
_NAME_KEY = '{"name": '
_ARGS_KEY = ', "arguments": '


def _template_layout(body: str) -> ParsedToolCall | None:
    """Fast path for the exact layout chat templates write; None when the body differs."""
    s = body.strip(" \t\n\r")
    if not s.startswith(_NAME_KEY) or not s.endswith("}"):
        return None
    try:
        name, end = _SCAN(s, len(_NAME_KEY))
        if not s.startswith(_ARGS_KEY, end):
            return None
        start = end + len(_ARGS_KEY)
        arguments, end = _SCAN(s, start)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(s) - 1 or not isinstance(name, str) or not name or type(arguments) is not dict:
        return None
    return ParsedToolCall(name=name, arguments=arguments, raw_arguments=s[start:end])


def decode_json_call(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    """``{"name": ..., "arguments": {...}}`` (``parameters`` accepted for ``arguments``)."""
    fast = _template_layout(body)
    if fast is not None:
        return [fast]
    try:
        obj, spans = decode_whole_object(body)
    except JsonSpanError as exc:
        return [BodyError(exc.kind, f"tool call is not a JSON object: {exc} (offset {exc.pos})")]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return [BodyError("missing_name", "tool call JSON has no string 'name'")]
    key = "arguments" if "arguments" in obj else "parameters" if "parameters" in obj else None
    if key is None:
        return [ParsedToolCall(name=name, arguments={}, raw_arguments="")]
    start, end = spans[key]
    raw = body[start:end]
    arguments = obj[key]
    if not isinstance(arguments, dict):
        return [BodyError("not_an_object", f"arguments of {name!r} are not a JSON object", name)]
    return [ParsedToolCall(name=name, arguments=arguments, raw_arguments=raw)]


def _json_call(call: ParsedToolCall) -> str:
    check_name(call.name, (), "hermes")
    return f'{{"name": {dumps(call.name)}, "arguments": {arguments_text(call)}}}'


def _render_hermes(calls: Sequence[ParsedToolCall]) -> str:
    return "\n".join(f"<tool_call>\n{_json_call(c)}\n</tool_call>" for c in calls)


def _render_longcat(calls: Sequence[ParsedToolCall]) -> str:
    return "\n".join(f"<longcat_tool_call>\n{_json_call(c)}\n</longcat_tool_call>" for c in calls)


HERMES = FormatSpec(
    name="hermes",
    call_start="<tool_call>",
    call_end="</tool_call>",
    decode=decode_json_call,
    render_calls=_render_hermes,
    json_aware=True,
    template_json=True,
    reasoning_pad="\n",
    reasoning_after="\n\n",
    content_sep="\n",
)

LONGCAT = FormatSpec(
    name="longcat",
    call_start="<longcat_tool_call>",
    call_end="</longcat_tool_call>",
    decode=decode_json_call,
    render_calls=_render_longcat,
    json_aware=True,
    template_json=True,
    reasoning_pad="\n",
    reasoning_after="\n\n",
    content_sep="\n",
)
