"""A bwrap slot: one long-lived bubblewrap sandbox whose agent (``hermes-exec``) runs commands.

The sandbox starts with the slot's first command and lives until the slot is reset or closed:
namespaces, cgroups and the seccomp filters are set up once, and every command is a child of
the agent in a pid namespace of its own (see :mod:`hermes_sandbox.executor`). A reset stops the
sandbox, so the next trajectory gets a new one over an emptied slot directory.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import attrs

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._slot_files import WorkspaceFiles
from hermes_sandbox.backends.agent_slot import AgentSlot
from hermes_sandbox.backends.bwrap_command import bwrap_argv
from hermes_sandbox.backends.cgroups import SlotCgroup
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.limits import ResourceLimits

WORKSPACE = "/workspace"


@attrs.frozen(slots=True, kw_only=True)
class SandboxSetup:
    """What every slot sandbox of one backend shares (prepared once by the backend)."""

    binary: str
    binds: tuple[str, ...]
    agent: str
    agent_filter: bytes | None
    command_filter: bytes | None
    limits: ResourceLimits
    env: SlotEnv
    max_output_bytes: int
    spawner: ThreadPoolExecutor
    """The threads that start sandboxes; they live as long as the backend's sandboxes
    (bwrap's ``--die-with-parent`` ties a sandbox to the thread that started it)."""
    allow_network: bool
    disable_userns: bool
    mount_slots: bool
    """A tmpfs of ``limits.disk_bytes`` is mounted on every slot directory, which then also
    holds the sandbox's ``/tmp`` and ``/dev/shm`` (one disk limit for all three); otherwise
    ``/tmp`` and ``/dev/shm`` are tmpfs of ``limits.disk_bytes`` each.

    The backend builds one setup and derives each host's with its (budget-fitted) ``limits``.
    """

    @property
    def slot_bytes(self) -> int | None:
        """The size of the tmpfs on each slot directory (``None``: none mounted)."""
        return self.limits.disk_bytes if self.mount_slots else None


class BwrapSlot(AgentSlot):
    """A slot whose commands run in its bubblewrap sandbox; its files are accessed directly."""

    commands_die_with_agent = True

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        setup: SandboxSetup,
        owner: tuple[int, int] | None,
        cgroup: SlotCgroup | None = None,
    ) -> None:
        super().__init__(
            host_id,
            index,
            directory,
            env=setup.env,
            limits=setup.limits,
            max_output_bytes=setup.max_output_bytes,
            spawner=setup.spawner,
            owner=owner,
            cgroup=cgroup,
        )
        self._setup = setup
        self._files = WorkspaceFiles(
            os.path.join(directory, _host_dirs.WORKSPACE_DIR), WORKSPACE, owner
        )

    @property
    def workspace(self) -> str:
        return WORKSPACE

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return posixpath.join(WORKSPACE, relative_slot_path(cwd, WORKSPACE))

    def _fd_data(self) -> list[bytes]:
        setup = self._setup
        if setup.agent_filter is None or setup.command_filter is None:
            return []
        return [setup.agent_filter, setup.command_filter]

    def _agent_argv(self, control: int, fds: Sequence[int]) -> list[str]:
        setup = self._setup
        agent_args = ["--control-fd", str(control), "--pidns"]
        if fds:
            agent_args += ["--seccomp-fd", str(fds[1])]
        scratch = (
            (os.path.join(self._dir, "tmp"), os.path.join(self._dir, "shm"))
            if setup.slot_bytes is not None
            else None
        )
        return bwrap_argv(
            setup.binary,
            binds=setup.binds,
            workspace_host=os.path.join(self._dir, _host_dirs.WORKSPACE_DIR),
            workspace_inner=WORKSPACE,
            allow_network=setup.allow_network,
            agent=setup.agent,
            agent_args=agent_args,
            scratch_dirs=scratch,
            scratch_bytes=setup.limits.disk_bytes,
            seccomp_fd=fds[0] if fds else None,
            disable_userns=setup.disable_userns,
        )
