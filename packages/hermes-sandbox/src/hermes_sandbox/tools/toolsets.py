"""Toolsets named like hermes-agent's (``terminal``, ``file``) and tool-set resolution."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from hermes_protocols import ConfigError, Tool

from hermes_sandbox.tools.files import PatchTool, ReadFileTool, WriteFileTool
from hermes_sandbox.tools.search import SearchFilesTool
from hermes_sandbox.tools.terminal import TerminalTool


@attrs.frozen(slots=True)
class NamedToolset:
    """A named group of tools (implements ``hermes_protocols.Toolset``)."""

    name: str
    tools: tuple[Tool, ...]


def terminal_toolset() -> NamedToolset:
    return NamedToolset("terminal", (TerminalTool(),))


def file_toolset() -> NamedToolset:
    return NamedToolset("file", (ReadFileTool(), WriteFileTool(), PatchTool(), SearchFilesTool()))


def default_toolsets() -> dict[str, NamedToolset]:
    """Fresh instances of every built-in toolset, by name."""
    return {ts.name: ts for ts in (terminal_toolset(), file_toolset())}


def resolve_tools(names: Iterable[str]) -> list[Tool]:
    """The tools of the toolsets ``names`` (e.g. an environment's ``toolsets``), de-duplicated."""
    available = default_toolsets()
    tools: dict[str, Tool] = {}
    for name in names:
        if name not in available:
            raise ConfigError(f"unknown toolset {name!r}; available: {sorted(available)}")
        for tool in available[name].tools:
            tools.setdefault(tool.schema.name, tool)
    return list(tools.values())
