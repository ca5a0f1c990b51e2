"""The ``local`` backend: plain processes in per-slot directories, with NO isolation.

Commands see the whole machine as the user running hermes. Use it only for trusted code or
where bwrap cannot run; the pool logs a warning when it is chosen. Each slot's commands are
started by its executor agent (``hermes-exec``, without namespaces: see
:mod:`hermes_sandbox.executor`), which joins the slot's cgroups once. No process outlives its
command: the agent kills the command's process group when its shell exits, and, being a child
subreaper, every process the command left that the agent inherits (``setsid``, ``setsid env
-i``, double forks); a reset also kills by cgroup and by environment marker.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import anyio
import attrs
from hermes_protocols import WorkspaceEscape

from hermes_sandbox._paths import resolve_host_path
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._root_dir import default_root_dir, prepare_root, user_bin_dir
from hermes_sandbox.backends._slot_files import WorkspaceFiles
from hermes_sandbox.backends.agent_slot import AgentSlot
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.cgroups import (
    SlotCgroup,
    remove_host_cgroups,
    slot_cgroup,
    subtree_for,
)
from hermes_sandbox.backends.directory_host import DirectoryHost, workspaces_mountable
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.budget import MachineBudget, fit_limits
from hermes_sandbox.cleanup import hosts_removed, sweep_directories
from hermes_sandbox.executor import agent_binary
from hermes_sandbox.limits import ResourceLimits

logger = logging.getLogger(__name__)


@attrs.frozen(slots=True)
class LocalConfig:
    """Settings of the ``local`` backend.

    ``root_dir``: where host directories live (default: per user, see
    :func:`default_root_dir`). ``max_output_bytes``: cap of stdout and of
    stderr per command (head + tail kept). ``executor_binary``: a prebuilt ``hermes-exec``
    instead of building it here with the machine's C compiler.
    """

    root_dir: str = attrs.field(factory=lambda: default_root_dir("local"))
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    env: SlotEnv = attrs.field(factory=SlotEnv)
    max_output_bytes: int = 1 << 20
    executor_binary: str | None = None


class LocalSlot(AgentSlot):
    """A workspace directory on the host; its agent runs commands there as plain processes."""

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        config: LocalConfig,
        agent: str,
        spawner: ThreadPoolExecutor,
        cgroup: SlotCgroup | None = None,
        limits: ResourceLimits | None = None,
    ) -> None:
        super().__init__(
            host_id,
            index,
            directory,
            env=config.env,
            limits=limits or config.limits,
            max_output_bytes=config.max_output_bytes,
            spawner=spawner,
            cgroup=cgroup,
        )
        self._agent_binary = agent
        self._workspace = os.path.join(directory, _host_dirs.WORKSPACE_DIR)
        self._files = WorkspaceFiles(self._workspace, self._workspace, None)

    @property
    def workspace(self) -> str:
        return self._workspace

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return self._workspace
        real = resolve_host_path(self._workspace, cwd, self._workspace)
        if not os.path.isdir(real):
            raise WorkspaceEscape(f"working directory {cwd!r} is not a directory in the workspace")
        return real

    def _agent_argv(self, control: int, fds: Sequence[int]) -> list[str]:
        return [self._agent_binary, "--control-fd", str(control)]


class LocalBackend:
    """Starts :class:`DirectoryHost` hosts whose slots are :class:`LocalSlot` (no isolation)."""

    def __init__(self, config: LocalConfig | None = None) -> None:
        self.config = config or LocalConfig()
        self._prepare_lock = anyio.Lock()
        self._mount_slots = False
        self._limits = self.config.limits
        self._agent = ""
        self._spawner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hermes-local-spawn")
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
        self._limits, notes = fit_limits(
            self.config.limits, budget, slots, disk_in_memory=os.geteuid() == 0
        )
        return notes

    def _prepare_root(self) -> None:
        root = self.config.root_dir
        prepare_root(root, traversable=False)
        # Not under root_dir: the commands run as this user, one private copy serves them all.
        self._agent = agent_binary(user_bin_dir(), self.config.executor_binary)
        self._mount_slots = workspaces_mountable(root, self.config.limits.disk_bytes)

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
                host_id,
                i,
                d,
                self.config,
                self._agent,
                self._spawner,
                self._slot_cgroup(host_id, i),
                self._limits,
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
