"""Bind a set of tools to one slot: the ``ToolExecutor`` the agent loop calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hermes_protocols import HermesError, Slot, Tool, ToolError, ToolResult, ToolSchema


class SlotToolExecutor:
    """Runs tool calls by name against ``slot`` (implements ``hermes_protocols.ToolExecutor``).

    An unknown tool name raises :class:`~hermes_protocols.ToolError`; bad arguments raise
    :class:`~hermes_protocols.ToolArgumentError`; sandbox failures raise
    :class:`~hermes_protocols.SandboxError`; any other exception from a tool is wrapped in a
    ``ToolError``. The loop reports raised errors to the model as tool errors. Expected
    failures (missing file, ambiguous patch, timeout) are returned as
    ``ToolResult(is_error=True)`` instead.
    """

    def __init__(self, slot: Slot, tools: Iterable[Tool]) -> None:
        self.slot = slot
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            name = tool.schema.name
            if name in self._tools:
                raise ValueError(f"two tools are named {name!r}")
            self._tools[name] = tool

    @property
    def schemas(self) -> list[ToolSchema]:
        """The schemas to advertise to the model, in registration order."""
        return [tool.schema for tool in self._tools.values()]

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; available tools: {sorted(self._tools)}")
        try:
            return await tool(self.slot, arguments)
        except HermesError:
            raise
        except Exception as exc:
            raise ToolError(f"tool {name!r} failed: {type(exc).__name__}: {exc}") from exc


def bind_tools(slot: Slot, tools: Iterable[Tool]) -> SlotToolExecutor:
    """A :class:`SlotToolExecutor` for ``tools`` bound to ``slot``."""
    return SlotToolExecutor(slot, tools)
