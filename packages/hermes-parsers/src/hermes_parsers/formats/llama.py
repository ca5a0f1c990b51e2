"""Llama 3.1/3.2/4 JSON tool calls: the whole output is ``{"name": F, "parameters": {...}}``
(optionally after ``<|python_tag|>``), several calls separated by ``; ``."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn, ToolParseError

from hermes_parsers._buffered import BufferedParser
from hermes_parsers._json_spans import JsonSpanError, decode_object, skip_ws
from hermes_parsers._spec import Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import arguments_text, check_name, dumps

PYTHON_TAG = "<|python_tag|>"


def _call_start(text: str) -> int | None:
    """Offset of the first call object, or None when ``text`` is plain content."""
    s = skip_ws(text, 0)
    if text.startswith(PYTHON_TAG, s):
        return skip_ws(text, s + len(PYTHON_TAG))
    return s if text.startswith("{", s) else None


class Llama3JsonParser(BufferedParser):
    def __init__(self, name: str = "llama3_json") -> None:
        self.name = name

    def _decide(self, head: str) -> bool | None:
        s = skip_ws(head, 0)
        rest = head[s:]
        if not rest or PYTHON_TAG.startswith(rest):
            return None
        return _call_start(head) is None

    def _parse(self, text: str, schemas: Schemas) -> ParsedTurn:
        i = _call_start(text)
        if i is None:
            return ParsedTurn(content=text or None)
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        content: str | None = None
        while i < len(text):
            index = len(calls) + len(errors)
            try:
                obj, spans, end = decode_object(text, i)
            except JsonSpanError as exc:
                errors.append(
                    ToolParseError(exc.kind, f"tool call: {exc}", index, i, len(text), raw=text[i:])
                )
                break
            name = obj.get("name")
            key = "parameters" if "parameters" in obj else "arguments"
            if not isinstance(name, str) or not name:
                errors.append(
                    ToolParseError(
                        "missing_name", "JSON has no string 'name'", index, i, end, raw=text[i:end]
                    )
                )
            elif key in obj and not isinstance(obj[key], dict):
                errors.append(
                    ToolParseError(
                        "not_an_object",
                        f"{key} of {name!r} are not an object",
                        index,
                        i,
                        end,
                        name=name,
                        raw=text[i:end],
                    )
                )
            else:
                a, b = spans.get(key, (0, 0))
                calls.append(ParsedToolCall(name, obj.get(key, {}), text[a:b]))
            i = skip_ws(text, end)
            if text.startswith(";", i):
                i = skip_ws(text, i + 1)
            elif i < len(text):
                content = text[i:]
                break
        return ParsedTurn(content=content, tool_calls=calls, errors=errors)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        if reasoning is not None:
            raise RenderError(f"{self.name} has no reasoning block")
        if content and tool_calls:
            raise RenderError(f"{self.name} output is either content or tool calls, not both")
        if not tool_calls:
            if content and _call_start(content) is not None:
                raise RenderError(f"{self.name} content starting with '{{' reads as a tool call")
            return content or ""
        items = []
        for call in tool_calls:
            check_name(call.name, (), self.name)
            items.append(f'{{"name": {dumps(call.name)}, "parameters": {arguments_text(call)}}}')
        return "; ".join(items)
