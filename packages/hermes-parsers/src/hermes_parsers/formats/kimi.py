"""Kimi K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>``.

The id ``functions.NAME:IDX`` is kept as the call id; the name is read from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import arguments_text, check_name, json_arguments_call

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_ID = re.compile(r"(?:functions\.)?(?P<name>.+):(?P<idx>[0-9]+)", re.DOTALL)
_MARKERS = (SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END, '"')


def decode_kimi(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    head, sep, raw = body.partition(ARGUMENT_BEGIN)
    if not sep:
        return [BodyError("malformed_call", f"no {ARGUMENT_BEGIN} in tool call {body[:80]!r}")]
    call_id = head.strip()
    match = _ID.fullmatch(call_id)
    if match is None:
        return [BodyError("missing_name", f"tool call id {call_id!r} is not functions.NAME:IDX")]
    return [json_arguments_call(match["name"], raw, call_id)]


def _render(calls: Sequence[ParsedToolCall]) -> str:
    parts = [SECTION_BEGIN]
    for i, call in enumerate(calls):
        check_name(call.name, _MARKERS, "kimi_k2")
        call_id = call.id if call.id is not None else f"functions.{call.name}:{i}"
        match = _ID.fullmatch(call_id)
        if match is None or match["name"] != call.name or call_id != call_id.strip():
            raise RenderError(f"kimi_k2 call id {call_id!r} must be functions.{call.name}:IDX")
        parts.append(f"{CALL_BEGIN}{call_id}{ARGUMENT_BEGIN}{arguments_text(call)}{CALL_END}")
    parts.append(SECTION_END)
    return "".join(parts)


KIMI_K2 = FormatSpec(
    name="kimi_k2",
    call_start=CALL_BEGIN,
    call_end=CALL_END,
    decode=decode_kimi,
    render_calls=_render,
    json_aware=True,
    section=(SECTION_BEGIN, SECTION_END),
)
