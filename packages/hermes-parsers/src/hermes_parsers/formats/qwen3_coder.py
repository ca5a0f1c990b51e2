"""Qwen3-Coder: ``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n
</function>\\n</tool_call>``. Values are raw text, typed with the tool schema when given."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import check_name, check_text
from hermes_parsers.formats._typed_call import template_text, typed_call

_FN = "<function="
_FN_END = "</function>"
_P = "<parameter="
_P_END = "</parameter>"
_END = "</tool_call>"


def decode_qwen3_coder(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    start = body.find(_FN)
    close = body.find(">", start + len(_FN)) if start >= 0 else -1
    if start < 0 or close < 0:
        return [BodyError("missing_name", f"no <function=NAME> in tool call {body[:80]!r}")]
    name = body[start + len(_FN) : close].strip()
    if not name:
        return [BodyError("missing_name", "empty <function=> name")]
    fn_end = body.rfind(_FN_END)
    if fn_end < close:
        return [BodyError("malformed_call", f"<function={name}> is never closed", name)]
    raw = body[close + 1 : fn_end]
    pairs: list[tuple[str, str, bool | None]] = []
    i = 0
    while True:
        p = raw.find(_P, i)
        if p < 0:
            break
        k_end = raw.find(">", p)
        v_end = raw.find(_P_END, k_end) if k_end >= 0 else -1
        if v_end < 0:
            return [BodyError("malformed_call", f"unclosed <parameter= in {name!r}", name)]
        key = raw[p + len(_P) : k_end].strip()
        value = raw[k_end + 1 : v_end]
        value = value[1:] if value.startswith("\n") else value
        value = value[:-1] if value.endswith("\n") else value
        pairs.append((key, value, None))
        i = v_end + len(_P_END)
    return [typed_call(name, pairs, raw, schemas)]


def _render(calls: Sequence[ParsedToolCall]) -> str:
    out = []
    for call in calls:
        check_name(call.name, (">", "\n", _END), "qwen3_coder")
        if call.arguments is None:
            raise RenderError("qwen3_coder cannot render a call whose arguments did not decode")
        params = []
        for key, value in call.arguments.items():
            check_name(key, (">", "\n", _END), "qwen3_coder parameter")
            text = template_text(value)
            check_text("parameter value", text, (_P_END, _END), "qwen3_coder")
            params.append(f"{_P}{key}>\n{text}\n{_P_END}\n")
        out.append(f"<tool_call>\n{_FN}{call.name}>\n{''.join(params)}{_FN_END}\n{_END}")
    return "\n".join(out)


QWEN3_CODER = FormatSpec(
    name="qwen3_coder",
    call_start="<tool_call>",
    call_end=_END,
    decode=decode_qwen3_coder,
    render_calls=_render,
    reasoning_pad="\n",
    reasoning_after="\n\n",
    content_sep="\n",
)
