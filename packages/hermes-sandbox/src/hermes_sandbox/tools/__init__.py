"""The agent's tools, each called with a slot: terminal, read_file, write_file, patch,
search_files. The executor that binds a toolset to a slot is ``hermes_envs.SlotToolExecutor``."""

from hermes_sandbox.tools.files import PatchTool, ReadFileTool, WriteFileTool
from hermes_sandbox.tools.search import SearchFilesTool
from hermes_sandbox.tools.terminal import TerminalTool
from hermes_sandbox.tools.toolsets import (
    NamedToolset,
    default_toolsets,
    file_toolset,
    resolve_tools,
    terminal_toolset,
)

__all__ = [
    "NamedToolset",
    "PatchTool",
    "ReadFileTool",
    "SearchFilesTool",
    "TerminalTool",
    "WriteFileTool",
    "default_toolsets",
    "file_toolset",
    "resolve_tools",
    "terminal_toolset",
]
