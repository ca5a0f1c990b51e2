"""Pythonic calls (Llama 3.2 / Llama 4): the whole output is ``[f(a=1), g(b="x")]``, optionally
wrapped in ``<|python_start|>``/``<|python_end|>``. Values are Python literals; JSON's
``true``/``false``/``null`` are accepted too. Names and keys must be Python identifiers."""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections.abc import Sequence
from typing import Any

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn, ToolParseError

from hermes_parsers._buffered import BufferedParser
from hermes_parsers._spec import Schemas
from hermes_parsers.errors import RenderError

START, END = "<|python_start|>", "<|python_end|>"
_CALLS = re.compile(r"\s*(?:<\|python_start\|>\s*)?\[\s*[A-Za-z_][\w.]*\s*\(")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None}


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, str | int | float | bool)
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _literal(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            key = _literal(k) if k is not None else None
            if not isinstance(key, str):
                raise ValueError("dictionary keys must be strings")
            out[key] = _literal(v)
        return out
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    raise ValueError(f"not a literal: {ast.dump(node)[:60]}")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def py_literal(value: Any) -> str:
    """``value`` as a Python literal (strings double-quoted, JSON escapes)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, str | int | float):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}: {py_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise RenderError(f"pythonic cannot write {type(value).__name__} values")


def _identifier(text: str, what: str, dotted: bool) -> None:
    pattern = _NAME if dotted else re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    parts = text.split(".") if dotted else [text]
    if not pattern.fullmatch(text) or any(keyword.iskeyword(p) for p in parts):
        raise RenderError(f"pythonic {what} must be a Python identifier, got {text!r}")


class PythonicParser(BufferedParser):
    name = "pythonic"

    def _decide(self, head: str) -> bool | None:
        stripped = head.lstrip()
        if not stripped:
            return None
        if _CALLS.match(head):
            return False
        # Could still become ``[name(`` or ``<|python_start|>[``: wait for more text.
        probe = stripped[:1]
        return probe not in "[<"

    def _parse(self, text: str, schemas: Schemas) -> ParsedTurn:
        if not _CALLS.match(text):
            return ParsedTurn(content=text or None)
        source = text.strip()
        if source.startswith(START):
            source = source[len(START) :]
            source = source[: -len(END)] if source.endswith(END) else source
        source = source.strip()

        def fail(message: str, index: int = 0) -> ParsedTurn:
            err = ToolParseError("malformed_call", message, index, 0, len(text), raw=text)
            return ParsedTurn(content=None, tool_calls=calls, errors=(err,))

        calls: list[ParsedToolCall] = []
        try:
            tree = ast.parse(source, mode="eval")
        except (SyntaxError, ValueError) as exc:
            return fail(f"not a Python list of calls: {exc}")
        if not isinstance(tree.body, ast.List):
            return fail("pythonic tool calls must be one list")
        for index, node in enumerate(tree.body.elts):
            name = _dotted(node.func) if isinstance(node, ast.Call) else None
            if not isinstance(node, ast.Call) or name is None:
                return fail(f"list element {index} is not a call to a named function", index)
            if node.args or any(kw.arg is None for kw in node.keywords):
                return fail(f"{name}: only keyword arguments are supported", index)
            try:
                arguments = {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg}
            except (ValueError, RecursionError) as exc:
                return fail(f"{name}: {exc}", index)
            segment = ast.get_source_segment(source, node) or ""
            func = ast.get_source_segment(source, node.func) or name
            raw = segment[len(func) :].strip()[1:-1]
            calls.append(ParsedToolCall(name=name, arguments=arguments, raw_arguments=raw))
        return ParsedTurn(content=None, tool_calls=calls)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        if reasoning is not None:
            raise RenderError("pythonic has no reasoning block")
        if content and tool_calls:
            raise RenderError("pythonic output is either content or tool calls, not both")
        if not tool_calls:
            if content and _CALLS.match(content):
                raise RenderError("pythonic content starting with '[name(' reads as tool calls")
            return content or ""
        items = []
        for call in tool_calls:
            _identifier(call.name, "tool name", dotted=True)
            if call.arguments is None:
                raise RenderError("pythonic cannot render a call whose arguments did not decode")
            args = []
            for key, value in call.arguments.items():
                _identifier(key, "argument name", dotted=False)
                args.append(f"{key}={py_literal(value)}")
            items.append(f"{call.name}({', '.join(args)})")
        return "[" + ", ".join(items) + "]"
