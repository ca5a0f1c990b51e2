"""GLM-4.5/4.6 (``glm45``) and GLM-4.7 (``glm47``): ``<tool_call>NAME<arg_key>K</arg_key>
<arg_value>V</arg_value></tool_call>``; GLM-4.5 puts a newline after the name and each pair."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import check_name, check_text
from hermes_parsers.formats._typed_call import json_text, typed_call

_K, _K_END = "<arg_key>", "</arg_key>"
_V, _V_END = "<arg_value>", "</arg_value>"
_END = "</tool_call>"


def decode_glm(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    first = body.find(_K)
    name_end = first if first >= 0 else len(body)
    name = body[:name_end].strip()
    if not name:
        return [BodyError("missing_name", f"no tool name in {body[:80]!r}")]
    raw = body[name_end:]
    pairs: list[tuple[str, str, bool | None]] = []
    i = name_end
    while True:
        k = body.find(_K, i)
        if k < 0:
            break
        k_end = body.find(_K_END, k)
        v = body.find(_V, k_end) if k_end >= 0 else -1
        v_end = body.find(_V_END, v) if v >= 0 else -1
        if v_end < 0:
            return [BodyError("malformed_call", f"unbalanced <arg_key>/<arg_value> in {name!r}")]
        pairs.append((body[k + len(_K) : k_end], body[v + len(_V) : v_end], None))
        i = v_end + len(_V_END)
    return [typed_call(name, pairs, raw, schemas)]


def _renderer(newline: str, fmt: str) -> Callable[[Sequence[ParsedToolCall]], str]:
    def render(calls: Sequence[ParsedToolCall]) -> str:
        out = []
        for call in calls:
            check_name(call.name, (_K, _END, "\n"), fmt)
            if call.arguments is None:
                raise RenderError(f"{fmt} cannot render a call whose arguments did not decode")
            pairs = []
            for key, value in call.arguments.items():
                check_text("parameter name", key, (_K_END, _END), fmt)
                text = json_text(value)
                check_text("parameter value", text, (_V_END, _END), fmt)
                pairs.append(f"{newline}{_K}{key}{_K_END}{newline}{_V}{text}{_V_END}")
            out.append(f"<tool_call>{call.name}{''.join(pairs)}{newline}{_END}")
        return newline.join(out)

    return render


def _spec(name: str, newline: str) -> FormatSpec:
    return FormatSpec(
        name=name,
        call_start="<tool_call>",
        call_end=_END,
        decode=decode_glm,
        render_calls=_renderer(newline, name),
        reasoning_after=newline,
        content_sep=newline,
    )


GLM45 = _spec("glm45", "\n")
GLM47 = _spec("glm47", "")
