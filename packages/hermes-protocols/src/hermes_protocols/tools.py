"""Tool schemas, tool results and the tool / toolset / executor Protocols."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from hermes_protocols.json_types import JSONObject
from hermes_protocols.sandbox import Slot


@attrs.frozen(slots=True)
class ToolSchema:
    """A function tool as OpenAI describes it: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: JSONObject = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}, hash=False
    )


@attrs.frozen(slots=True)
class ToolResult:
    """What a tool returns to the model. ``is_error`` marks failures the model should see."""

    content: str
    is_error: bool = False
    metadata: JSONObject = attrs.field(factory=dict, eq=False)


@runtime_checkable
class Tool(Protocol):
    """A tool the agent can call; it runs against the slot of the current trajectory."""

    @property
    def schema(self) -> ToolSchema: ...

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult: ...


@runtime_checkable
class Toolset(Protocol):
    """A named group of tools (``terminal``, ``file``, ...)."""

    @property
    def name(self) -> str: ...

    @property
    def tools(self) -> Sequence[Tool]: ...


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs one validated tool call for the agent loop.

    Raising an exception is reported by the loop as an ``execution_error`` tool error; the
    rollout goes on.
    """

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> ToolResult: ...
