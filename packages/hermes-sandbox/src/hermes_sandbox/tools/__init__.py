"""The agent's tools, bound to a slot: terminal, read_file, write_file, patch, search_files."""

from hermes_sandbox.tools.executor import SlotToolExecutor, bind_tools
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
    "SlotToolExecutor",
    "TerminalTool",
    "WriteFileTool",
    "bind_tools",
    "default_toolsets",
    "file_toolset",
    "resolve_tools",
    "terminal_toolset",
]
