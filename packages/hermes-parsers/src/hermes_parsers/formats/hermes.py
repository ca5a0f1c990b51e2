"""Hermes 2 Pro/3/4 and Qwen 2.5/3 (``<tool_call>\\n{"name": F, "arguments": {..}}\\n</tool_call>``)
and LongCat Flash (the same JSON inside ``<longcat_tool_call>`` tags)."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._json_spans import JsonSpanError, decode_whole_object
from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.formats._common import arguments_text, check_name, dumps


def decode_json_call(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    """``{"name": ..., "arguments": {...}}`` (``parameters`` accepted for ``arguments``)."""
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
    reasoning_pad="\n",
    reasoning_after="\n\n",
    content_sep="\n",
)
