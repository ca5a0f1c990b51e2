"""hermes-sandbox: a leak-proof slot pool over sandbox backends, and the agent's tools.

``SandboxPool`` hands out slots of hosts started by a backend (``BwrapBackend`` is the default
and isolates every command; ``LocalBackend`` does not isolate). Tools (``terminal``,
``read_file``, ``write_file``, ``patch``, ``search_files``) run against a slot.

The cluster side (the sandbox server, and the ``remote``, ``docker``, ``modal`` and ``nomad``
backends) is re-exported here too but imported on first attribute access, so
``import hermes_sandbox`` stays cheap (httpx, starlette and uvicorn are not loaded until used;
the ``modal`` SDK only when a ``ModalBackend`` first talks to Modal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hermes_sandbox.backends.base import Host, HostBackend, HostSpec
from hermes_sandbox.backends.bwrap import BwrapBackend, BwrapConfig, BwrapSlot
from hermes_sandbox.backends.bwrap_command import bwrap_binary
from hermes_sandbox.backends.directory_host import DirectoryHost
from hermes_sandbox.backends.local import LocalBackend, LocalConfig, LocalSlot
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.limits import ResourceLimits
from hermes_sandbox.pool import PoolConfig, SandboxPool
from hermes_sandbox.tools import (
    NamedToolset,
    PatchTool,
    ReadFileTool,
    SearchFilesTool,
    TerminalTool,
    WriteFileTool,
    default_toolsets,
    file_toolset,
    resolve_tools,
    terminal_toolset,
)

if TYPE_CHECKING:
    from hermes_sandbox.backends.docker import DockerBackend
    from hermes_sandbox.backends.docker_config import DockerConfig
    from hermes_sandbox.backends.modal import ModalAuthError, ModalBackend, ModalConfig
    from hermes_sandbox.backends.nomad import (
        NomadBackend,
        NomadConfig,
        NomadError,
        NomadImagePullError,
    )
    from hermes_sandbox.backends.remote import (
        RemoteBackend,
        RemoteConfig,
        RemoteHost,
        RemoteSlot,
        RemoteTimeouts,
    )
    from hermes_sandbox.server import ServerConfig, create_app, running_server, serve

_LAZY = {
    "DockerBackend": "hermes_sandbox.backends.docker",
    "DockerConfig": "hermes_sandbox.backends.docker_config",
    "ModalAuthError": "hermes_sandbox.backends.modal",
    "ModalBackend": "hermes_sandbox.backends.modal",
    "ModalConfig": "hermes_sandbox.backends.modal",
    "NomadBackend": "hermes_sandbox.backends.nomad",
    "NomadConfig": "hermes_sandbox.backends.nomad",
    "NomadError": "hermes_sandbox.backends.nomad",
    "NomadImagePullError": "hermes_sandbox.backends.nomad",
    "RemoteBackend": "hermes_sandbox.backends.remote",
    "RemoteConfig": "hermes_sandbox.backends.remote",
    "RemoteHost": "hermes_sandbox.backends.remote",
    "RemoteSlot": "hermes_sandbox.backends.remote",
    "RemoteTimeouts": "hermes_sandbox.backends.remote",
    "ServerConfig": "hermes_sandbox.server",
    "create_app": "hermes_sandbox.server",
    "running_server": "hermes_sandbox.server",
    "serve": "hermes_sandbox.server",
}


def __getattr__(name: str) -> Any:
    """Import a cluster-side name on first use (see the module docstring)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BwrapBackend",
    "BwrapConfig",
    "BwrapSlot",
    "DirectoryHost",
    "DockerBackend",
    "DockerConfig",
    "Host",
    "HostBackend",
    "HostSpec",
    "LocalBackend",
    "LocalConfig",
    "LocalSlot",
    "ModalAuthError",
    "ModalBackend",
    "ModalConfig",
    "NamedToolset",
    "NomadBackend",
    "NomadConfig",
    "NomadError",
    "NomadImagePullError",
    "PatchTool",
    "PoolConfig",
    "ReadFileTool",
    "RemoteBackend",
    "RemoteConfig",
    "RemoteHost",
    "RemoteSlot",
    "RemoteTimeouts",
    "ResourceLimits",
    "SandboxPool",
    "SearchFilesTool",
    "ServerConfig",
    "SlotEnv",
    "TerminalTool",
    "WriteFileTool",
    "bwrap_binary",
    "create_app",
    "default_toolsets",
    "file_toolset",
    "resolve_tools",
    "running_server",
    "serve",
    "terminal_toolset",
]
