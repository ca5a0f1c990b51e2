"""``DelimitedParser``: parse, render and stream any format described by a ``FormatSpec``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn

from hermes_parsers._schemas import schemas_from_tools
from hermes_parsers._spec import FormatSpec
from hermes_parsers._stream import CompiledSpec, DelimitedStream
from hermes_parsers.errors import RenderError


class DelimitedParser:
    """A ``ToolCallParser`` for a marker-delimited format.

    ``reasoning_open=True`` is for prompts that already opened the reasoning block (templates
    that end the prompt with ``<think>``): the output then starts inside reasoning.
    """

    def __init__(self, spec: FormatSpec, *, reasoning_open: bool = False) -> None:
        if reasoning_open and spec.reasoning is None:
            raise RenderError(f"format {spec.name!r} has no reasoning block to start inside")
        self._spec = spec
        self._compiled = CompiledSpec(spec)
        self._reasoning_open = reasoning_open

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def spec(self) -> FormatSpec:
        return self._spec

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> DelimitedStream:
        return DelimitedStream(
            self._spec,
            self._compiled,
            schemas_from_tools(tools),
            reasoning_open=self._reasoning_open,
        )

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        stream = self.stream(tools=tools)
        stream.feed(text)
        return stream.finish()[1]

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        spec = self._spec
        parts: list[str] = []
        if reasoning is not None:
            if spec.reasoning is None:
                raise RenderError(f"format {spec.name!r} cannot carry reasoning")
            opener, close = spec.reasoning
            if close in reasoning:
                raise RenderError(f"reasoning contains the closing marker {close!r}")
            if self._reasoning_open:
                parts += [reasoning, spec.reasoning_pad, close, spec.reasoning_after]
            else:
                pad = spec.reasoning_pad
                parts += [opener, pad, reasoning, pad, close, spec.reasoning_after]
        elif self._reasoning_open:
            raise RenderError("this parser expects output to start inside reasoning")
        if content:
            for marker in spec.content_markers:
                if marker in content:
                    raise RenderError(
                        f"content contains {marker!r}, which {spec.name} reads as markup"
                    )
            parts.append(content)
        if tool_calls:
            if content:
                parts.append(spec.content_sep)
            parts.append(spec.render_calls(tool_calls))
        return "".join(parts)
