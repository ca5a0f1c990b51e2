"""The ``local`` backend: plain subprocesses in per-slot directories, with NO isolation.

Commands see the whole machine as the user running hermes. Use it only for trusted code or
where bwrap cannot run; the pool logs a warning when it is chosen. No process outlives its
command: the process group, an environment marker and, where cgroup v1 ``pids``/``memory``
are writable, a cgroup per slot (which also catches ``setsid env -i`` children) are killed
after every command.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping

import anyio
import attrs
from hermes_protocols import ExecResult, WorkspaceEscape

from hermes_sandbox._paths import resolve_host_path
from hermes_sandbox._process import kill_group, run_command
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._root_dir import default_root_dir, prepare_root
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends._workspace_fs import note_if_full
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.cgroups import (
    SlotCgroup,
    controller_bases,
    remove_host_cgroups,
    slot_cgroup,
    subtree_for,
)
from hermes_sandbox.backends.directory_host import DirectoryHost, workspaces_mountable
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.budget import MachineBudget, fit_limits
from hermes_sandbox.cleanup import hosts_removed, sweep_directories
from hermes_sandbox.limits import ResourceLimits

logger = logging.getLogger(__name__)


@attrs.frozen(slots=True)
class LocalConfig:
    """Settings of the ``local`` backend.

    ``root_dir``: where host directories live (default: per user, see
    :func:`default_root_dir`). ``max_output_bytes``: cap of stdout and of
    stderr per command (head + tail kept).
    """

    root_dir: str = attrs.field(factory=lambda: default_root_dir("local"))
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    env: SlotEnv = attrs.field(factory=SlotEnv)
    max_output_bytes: int = 1 << 20


class LocalSlot(HostFilesSlot):
    """A workspace directory on the host; commands run there as plain subprocesses."""

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        config: LocalConfig,
        cgroup: SlotCgroup | None = None,
        limits: ResourceLimits | None = None,
    ) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._limits = limits or config.limits
        self._cgroup = cgroup
        self._marker = f"{self._slot_id}/"
        self._slot_dir = directory
        self._dir = os.path.join(directory, _host_dirs.WORKSPACE_DIR)
        self._config = config
        self._files = WorkspaceFiles(self._dir, self._dir, None)
        self._running: set[int] = set()

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return self._dir

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return self._dir
        real = resolve_host_path(self._dir, cwd, self._dir)
        if not os.path.isdir(real):
            raise WorkspaceEscape(f"working directory {cwd!r} is not a directory in the workspace")
        return real

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        prologue = self._limits.ulimit_prologue()
        script = f"{prologue}\n{command}" if prologue else command
        argv = ["bash", "-c", script]
        if self._cgroup is not None:
            # Join the slot's cgroups first: setsid/env -i children stay in them (and die).
            joins = " && ".join(f"echo $$ > {shlex.quote(f)}" for f in self._cgroup.procs_files)
            argv = ["sh", "-c", f'{joins} && exec "$0" "$@"', *argv]
        result = await run_command(
            argv,
            timeout=timeout,
            max_output_bytes=self._config.max_output_bytes,
            cwd=self._cwd(cwd),
            env=self._config.env.build(self._dir, self._marker, env),
            stdin=stdin,
            after_kill=self.kill_all,
            running=self._running,
        )
        if self._cgroup is not None and not self._running:  # no other command of the slot
            await anyio.to_thread.run_sync(self._cgroup.kill_all)
        return await note_if_full(result, self._slot_dir, self._limits.disk_bytes)

    async def stop(self) -> None:
        """Nothing to stop: every command is its own process."""

    def kill_all(self) -> None:
        for pgid in list(self._running):
            kill_group(pgid)
        if self._cgroup is not None:
            self._cgroup.kill_all()
        _host_dirs.kill_marked(self._marker)


class LocalBackend:
    """Starts :class:`DirectoryHost` hosts whose slots are :class:`LocalSlot` (no isolation)."""

    def __init__(self, config: LocalConfig | None = None) -> None:
        self.config = config or LocalConfig()
        self._prepare_lock = anyio.Lock()
        self._mount_slots = False
        self._limits = self.config.limits
        self._prepared = False
        self._cgroup_subtree = subtree_for(self.config.root_dir)
        logger.warning(
            "hermes-sandbox: the 'local' backend runs commands WITHOUT isolation "
            "(they can read and write anything this user can); use 'bwrap' for untrusted code"
        )

    @property
    def name(self) -> str:
        return "local"

    def fit_budget(self, budget: MachineBudget, slots: int) -> list[str]:
        """Clamp the slot limits so ``slots`` slots fit ``budget``; what changed."""
        disk_in_memory = os.geteuid() == 0
        self._limits, notes = fit_limits(
            self.config.limits, budget, slots, disk_in_memory=disk_in_memory
        )
        return notes

    def _prepare_root(self) -> None:
        prepare_root(self.config.root_dir, traversable=False)
        self._mount_slots = workspaces_mountable(
            self.config.root_dir, self.config.limits.disk_bytes
        )
        if not controller_bases(self._cgroup_subtree):
            logger.warning(
                "hermes-sandbox: 'local' cannot create cgroups here (cgroup v1 pids/memory not "
                "writable): a command's processes that leave its process group AND clear their "
                "environment (setsid env -i ...) can outlive it"
            )

    async def _prepare(self) -> None:
        async with self._prepare_lock:
            if not self._prepared:
                await anyio.to_thread.run_sync(self._prepare_root)
                self._prepared = True

    async def start_host(self, spec: HostSpec) -> Host:
        await self._prepare()
        return await DirectoryHost.create(
            spec,
            self.config.root_dir,
            lambda host_id, i, d: LocalSlot(
                host_id, i, d, self.config, self._slot_cgroup(host_id, i), self._limits
            ),
            lambda _i: None,
            on_remove=lambda: remove_host_cgroups(self._cgroup_subtree, spec.host_id),
            workspace_bytes=self._limits.disk_bytes if self._mount_slots else None,
        )

    def _slot_cgroup(self, host_id: str, index: int) -> SlotCgroup | None:
        limits = self._limits
        return slot_cgroup(
            self._cgroup_subtree,
            host_id,
            index,
            memory_bytes=limits.slot_memory_bytes,
            max_pids=limits.slot_processes,
            cpus=limits.slot_cpus,
            owner=None,
        )

    async def sweep_orphans(self, pool_name: str) -> int:
        await self._prepare()
        return await anyio.to_thread.run_sync(self._sweep, pool_name)

    def _sweep(self, pool_name: str) -> int:
        # Any dead pool's leftovers (not only ``pool_name``'s): see hermes_sandbox.cleanup.
        return hosts_removed(sweep_directories([self.config.root_dir]))
