"""hermes-sandbox: a leak-proof slot pool over sandbox backends, and the agent's tools.

``SlotPool`` hands out slots of hosts started by a backend (``BwrapBackend`` is the default
and isolates every command; ``LocalBackend`` does not isolate). Tools (``terminal``,
``read_file``, ``write_file``, ``patch``, ``search_files``) run against a slot.
"""

from hermes_sandbox.backends.base import Host, HostBackend, HostSpec
from hermes_sandbox.backends.bwrap import BwrapBackend, BwrapConfig, BwrapSlot
from hermes_sandbox.backends.bwrap_command import bwrap_binary
from hermes_sandbox.backends.directory_host import DirectoryHost
from hermes_sandbox.backends.local import LocalBackend, LocalConfig, LocalSlot
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.limits import ResourceLimits
from hermes_sandbox.pool import PoolConfig, SlotPool
from hermes_sandbox.tools import (
    NamedToolset,
    PatchTool,
    ReadFileTool,
    SearchFilesTool,
    SlotToolExecutor,
    TerminalTool,
    WriteFileTool,
    bind_tools,
    default_toolsets,
    file_toolset,
    resolve_tools,
    terminal_toolset,
)

__all__ = [
    "BwrapBackend",
    "BwrapConfig",
    "BwrapSlot",
    "DirectoryHost",
    "Host",
    "HostBackend",
    "HostSpec",
    "LocalBackend",
    "LocalConfig",
    "LocalSlot",
    "NamedToolset",
    "PatchTool",
    "PoolConfig",
    "ReadFileTool",
    "ResourceLimits",
    "SearchFilesTool",
    "SlotEnv",
    "SlotPool",
    "SlotToolExecutor",
    "TerminalTool",
    "WriteFileTool",
    "bind_tools",
    "bwrap_binary",
    "default_toolsets",
    "file_toolset",
    "resolve_tools",
    "terminal_toolset",
]
