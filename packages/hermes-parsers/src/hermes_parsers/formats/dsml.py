"""DeepSeek V3.2 (and V4) DSML: ``<｜DSML｜function_calls>`` holding ``<｜DSML｜invoke name="F">``
elements with ``<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`` children.

``string="true"`` values are raw text; ``string="false"`` values are JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._spec import BodyError, Decoded, FormatSpec, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import check_name, check_text
from hermes_parsers.formats._typed_call import json_text, typed_call

DSML = "｜DSML｜"
CALLS_BEGIN = f"<{DSML}function_calls>"
CALLS_END = f"</{DSML}function_calls>"
INVOKE = f"<{DSML}invoke"
INVOKE_END = f"</{DSML}invoke>"
PARAM = f"<{DSML}parameter"
PARAM_END = f"</{DSML}parameter>"
_HEAD = re.compile(r'\s+name="(?P<name>[^"]*)"\s*>')
_ATTRS = re.compile(r'\s+name="(?P<key>[^"]*)"(?:\s+string="(?P<string>true|false)")?\s*>')


def decode_dsml(body: str, index: int, schemas: Schemas) -> list[Decoded]:
    head = _HEAD.match(body)
    if head is None or not head["name"]:
        return [BodyError("missing_name", f'no name="..." on the invoke: {body[:80]!r}')]
    name = head["name"]
    raw = body[head.end() :]
    pairs: list[tuple[str, str, bool | None]] = []
    i = head.end()
    while True:
        p = body.find(PARAM, i)
        if p < 0:
            break
        attrs = _ATTRS.match(body, p + len(PARAM))
        end = body.find(PARAM_END, attrs.end()) if attrs else -1
        if attrs is None or end < 0:
            return [BodyError("malformed_call", f"malformed parameter in {name!r}", name)]
        flag = attrs["string"]
        pairs.append(
            (attrs["key"], body[attrs.end() : end], None if flag is None else flag == "true")
        )
        i = end + len(PARAM_END)
    return [typed_call(name, pairs, raw, schemas)]


def _render(calls: Sequence[ParsedToolCall]) -> str:
    out = [CALLS_BEGIN, "\n"]
    for call in calls:
        check_name(call.name, ('"', INVOKE_END), "deepseek_v32")
        if call.arguments is None:
            raise RenderError("deepseek_v32 cannot render a call whose arguments did not decode")
        out.append(f'{INVOKE} name="{call.name}">\n')
        for key, value in call.arguments.items():
            check_text("parameter name", key, ('"', INVOKE_END), "deepseek_v32")
            text = json_text(value)
            check_text("parameter value", text, (PARAM_END, INVOKE_END), "deepseek_v32")
            string = "true" if isinstance(value, str) else "false"
            out.append(f'{PARAM} name="{key}" string="{string}">{text}{PARAM_END}\n')
        out.append(f"{INVOKE_END}\n")
    out.append(CALLS_END)
    return "".join(out)


DEEPSEEK_V32 = FormatSpec(
    name="deepseek_v32",
    call_start=INVOKE,
    call_end=INVOKE_END,
    decode=decode_dsml,
    render_calls=_render,
    section=(CALLS_BEGIN, CALLS_END),
    content_sep="\n\n",
)
