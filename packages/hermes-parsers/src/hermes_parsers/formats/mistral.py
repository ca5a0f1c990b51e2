"""Mistral: ``[TOOL_CALLS]name[ARGS]{json}`` per call (tokenizer v11+) and the older
``[TOOL_CALLS] [{"name": ..., "arguments": ..., "id": ...}]`` array (pre-v11).

Both are parsed by either parser; ``mistral`` renders v11+, ``mistral_pre_v11`` the array.
Tool call ids are 9-character alphanumeric strings. v11+ text carries no id, so parsing
derives a stable one from the call's position and text (the same text always gets the same id).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._json_spans import JsonSpanError, decode_object, skip_ws
from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import (
    arguments_text,
    check_name,
    dumps,
    json_arguments_call,
)

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def stable_id(index: int, name: str, raw: str) -> str:
    """A 9-character alphanumeric id derived from the call (deterministic, not random)."""
    digest = int.from_bytes(
        hashlib.sha256(f"{index}\0{name}\0{raw}".encode("utf-8", "surrogatepass")).digest()[:8]
    )
    chars = []
    for _ in range(9):
        digest, r = divmod(digest, 62)
        chars.append(_ALPHABET[r])
    return "".join(chars)


def _decode_array(body: str, start: int, index: int) -> list[Decoded]:
    out: list[Decoded] = []
    i = skip_ws(body, start + 1)
    try:
        while i < len(body) and body[i] != "]":
            obj, spans, end = decode_object(body, i)
            name = obj.get("name")
            if not isinstance(name, str) or not name:
                out.append(BodyError("missing_name", "tool call object has no string 'name'"))
            elif "arguments" not in obj or not isinstance(obj["arguments"], dict):
                out.append(BodyError("not_an_object", f"arguments of {name!r} not an object", name))
            else:
                a, b = spans["arguments"]
                call_id = obj.get("id")
                raw = body[a:b]
                if not isinstance(call_id, str):
                    call_id = stable_id(index + len(out), name, raw)
                out.append(ParsedToolCall(name, obj["arguments"], raw, call_id))
            i = skip_ws(body, end)
            if i < len(body) and body[i] == ",":
                i = skip_ws(body, i + 1)
        if i >= len(body) or skip_ws(body, i + 1) != len(body):
            raise JsonSpanError("tool call array is not closed by ']' at the end", i)
    except (JsonSpanError, IndexError) as exc:
        pos = exc.pos if isinstance(exc, JsonSpanError) else len(body)
        out.append(BodyError("invalid_json", f"tool call array: {exc} (offset {pos})"))
    return out


def decode_mistral(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    start = skip_ws(body, 0)
    if body.startswith("[", start):
        return _decode_array(body, start, index)
    head, sep, raw = body.partition(ARGS)
    if not sep:
        return [BodyError("malformed_call", f"{TOOL_CALLS} without {ARGS}: {body[:80]!r}")]
    name, _, call_id = head.partition(CALL_ID)
    name = name.strip()
    if not name:
        return [BodyError("missing_name", f"no tool name before {ARGS}")]
    decoded = json_arguments_call(name, raw, call_id.strip() or stable_id(index, name, raw))
    return [decoded]


def _forbid(name: str) -> None:
    check_name(name, (TOOL_CALLS, ARGS, CALL_ID, '"', "["), "mistral")


def _render_v11(calls: Sequence[ParsedToolCall]) -> str:
    parts = []
    for call in calls:
        _forbid(call.name)
        parts.append(f"{TOOL_CALLS}{call.name}{ARGS}{arguments_text(call)}")
    return "".join(parts)


def _render_pre_v11(calls: Sequence[ParsedToolCall]) -> str:
    items = []
    for i, call in enumerate(calls):
        args = arguments_text(call)
        call_id = call.id if call.id is not None else stable_id(i, call.name, args)
        if not _ID.fullmatch(call_id):
            raise RenderError(f"mistral tool call ids must be 9 alphanumerics, got {call_id!r}")
        check_name(call.name, (), "mistral")
        items.append(f'{{"name": {dumps(call.name)}, "arguments": {args}, "id": "{call_id}"}}')
    return f"{TOOL_CALLS} [{', '.join(items)}]"


MISTRAL = FormatSpec(
    name="mistral",
    call_start=TOOL_CALLS,
    call_end=None,
    decode=decode_mistral,
    render_calls=_render_v11,
    json_aware=True,
    reasoning=("[THINK]", "[/THINK]"),
)

MISTRAL_PRE_V11 = FormatSpec(
    name="mistral_pre_v11",
    call_start=TOOL_CALLS,
    call_end=None,
    decode=decode_mistral,
    render_calls=_render_pre_v11,
    json_aware=True,
    reasoning=("[THINK]", "[/THINK]"),
)
