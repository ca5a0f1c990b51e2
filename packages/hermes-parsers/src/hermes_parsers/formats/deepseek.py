"""DeepSeek V3/R1 and V3.1 (special-token delimited JSON calls).

V3: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{..}\\n```
<｜tool▁call▁end｜>`` (calls separated by a newline) then ``<｜tool▁calls▁end｜>``.
V3.1: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>`` inside the same section.
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.formats._common import arguments_text, check_name, json_arguments_call

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
_MARKERS = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, '"')
_FENCE_OPEN = "\n```json\n"
_FENCE_CLOSE = "\n```"


def decode_v3(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    _kind, sep, rest = body.partition(SEP)
    if not sep:
        return [BodyError("malformed_call", f"no {SEP} in tool call {body[:80]!r}")]
    name, fence, raw = rest.partition(_FENCE_OPEN)
    name = name.strip()
    if not name:
        return [BodyError("missing_name", "no tool name after the tool separator")]
    if not fence or not raw.endswith(_FENCE_CLOSE):
        return [BodyError("malformed_call", "arguments are not in a ```json fence", name)]
    return [json_arguments_call(name, raw[: -len(_FENCE_CLOSE)])]


def decode_v31(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    name, sep, raw = body.partition(SEP)
    name = name.strip()
    if not sep:
        return [BodyError("malformed_call", f"no {SEP} in tool call {body[:80]!r}")]
    if not name:
        return [BodyError("missing_name", "no tool name before the tool separator")]
    return [json_arguments_call(name, raw)]


def _render_v3(calls: Sequence[ParsedToolCall]) -> str:
    items = []
    for call in calls:
        check_name(call.name, (*_MARKERS, "\n"), "deepseek_v3")
        items.append(
            f"{CALL_BEGIN}function{SEP}{call.name}{_FENCE_OPEN}{arguments_text(call)}"
            f"{_FENCE_CLOSE}{CALL_END}"
        )
    return CALLS_BEGIN + "\n".join(items) + CALLS_END


def _render_v31(calls: Sequence[ParsedToolCall]) -> str:
    items = []
    for call in calls:
        check_name(call.name, _MARKERS, "deepseek_v31")
        items.append(f"{CALL_BEGIN}{call.name}{SEP}{arguments_text(call)}{CALL_END}")
    return CALLS_BEGIN + "".join(items) + CALLS_END


DEEPSEEK_V3 = FormatSpec(
    name="deepseek_v3",
    call_start=CALL_BEGIN,
    call_end=CALL_END,
    decode=decode_v3,
    render_calls=_render_v3,
    json_aware=True,
    section=(CALLS_BEGIN, CALLS_END),
)

DEEPSEEK_V31 = FormatSpec(
    name="deepseek_v31",
    call_start=CALL_BEGIN,
    call_end=CALL_END,
    decode=decode_v31,
    render_calls=_render_v31,
    json_aware=True,
    section=(CALLS_BEGIN, CALLS_END),
)
