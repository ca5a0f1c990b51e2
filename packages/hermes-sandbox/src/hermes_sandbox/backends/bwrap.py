"""The ``bwrap`` backend (the default): every command runs in a fresh bubblewrap sandbox.

Each command gets new user/pid/mount/net/ipc/uts namespaces, a read-only view of the host's
system directories (or of a root filesystem directory), a private tmpfs ``/tmp``, and its slot's
workspace as the only writable tree, mounted at ``/workspace``. When hermes runs as root every
slot runs as its own unprivileged uid (so it cannot read root-only host files and RLIMIT_NPROC
binds). All capabilities are dropped; the sandbox dies with its parent.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shlex
import zlib
from collections.abc import Mapping

import anyio
import attrs
from hermes_protocols import ExecResult, IsolationUnavailable

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox._process import kill_group, run_command
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.bwrap_command import bwrap_argv, bwrap_binary, system_binds
from hermes_sandbox.backends.cgroups import (
    SlotCgroup,
    remove_host_cgroups,
    slot_cgroup,
    subtree_for,
    sweep_cgroups,
)
from hermes_sandbox.backends.directory_host import DirectoryHost
from hermes_sandbox.backends.local import DEFAULT_ROOT, LocalConfig, LocalSlot
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.limits import ResourceLimits

logger = logging.getLogger(__name__)

WORKSPACE = "/workspace"


@attrs.frozen(slots=True)
class BwrapConfig:
    """Settings of the ``bwrap`` backend.

    ``rootfs``: a directory used as ``/`` (e.g. built by debootstrap) instead of the host's
    system dirs. ``uid_range``: uids handed to slots when hermes runs as root.
    ``require_isolation``: when bwrap cannot run, fail (``IsolationUnavailable``) instead of
    falling back to unisolated local subprocesses.
    """

    root_dir: str = os.path.join(DEFAULT_ROOT, "bwrap")
    allow_network: bool = False
    rootfs: str | None = None
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    env: SlotEnv = attrs.field(factory=SlotEnv)
    max_output_bytes: int = 1 << 20
    require_isolation: bool = True
    uid_range: tuple[int, int] = (200_000, 265_000)


class BwrapSlot(HostFilesSlot):
    """A slot whose commands run under bubblewrap; its files are accessed directly."""

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        config: BwrapConfig,
        binary: str,
        binds: list[str],
        owner: tuple[int, int] | None,
        cgroup: SlotCgroup | None = None,
    ) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._cgroup = cgroup
        self._marker = f"{self._slot_id}/"
        self._dir = directory
        self._config = config
        self._binary = binary
        self._binds = binds
        self._owner = owner
        self._files = WorkspaceFiles(directory, WORKSPACE, owner)
        self._running: set[int] = set()

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return WORKSPACE

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return posixpath.join(WORKSPACE, relative_slot_path(cwd, WORKSPACE))

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        prologue = self._config.limits.ulimit_prologue()
        argv = bwrap_argv(
            self._binary,
            binds=self._binds,
            workspace_host=self._dir,
            workspace_inner=WORKSPACE,
            cwd=self._cwd(cwd),
            allow_network=self._config.allow_network,
            script=f"{prologue}\n{command}" if prologue else command,
        )
        if self._cgroup is not None:
            # Join the slot's cgroups before bwrap starts, so every process is inside them.
            joins = " && ".join(f"echo $$ > {shlex.quote(f)}" for f in self._cgroup.procs_files)
            argv = ["sh", "-c", f'{joins} && exec "$0" "$@"', *argv]
        user, group = self._owner if self._owner is not None else (None, None)
        return await run_command(
            argv,
            timeout=timeout,
            max_output_bytes=self._config.max_output_bytes,
            cwd="/",
            env=self._config.env.build(WORKSPACE, self._marker, env),
            stdin=stdin,
            user=user,
            group=group,
            after_kill=self.kill_all,
            running=self._running,
        )

    def kill_all(self) -> None:
        for pgid in list(self._running):
            kill_group(pgid)
        if self._cgroup is not None:
            self._cgroup.kill_all()
        _host_dirs.kill_marked(self._marker)


class BwrapBackend:
    """Starts :class:`DirectoryHost` hosts whose slots are :class:`BwrapSlot`.

    The first host start probes that bwrap really works here; when it does not, the backend
    raises :class:`~hermes_protocols.IsolationUnavailable` (``require_isolation=True``, the
    default) or logs a warning and runs unisolated local slots.
    """

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        lo, hi = self.config.uid_range
        if not 0 < lo < hi:
            raise ValueError(f"uid_range must be (low, high) with 0 < low < high, got {lo, hi}")
        self._as_root = os.geteuid() == 0
        self._cgroup_subtree = subtree_for(self.config.root_dir)
        self._probe_lock = anyio.Lock()
        self._isolated: bool | None = None
        self._probe_error = ""

    @property
    def name(self) -> str:
        return "bwrap"

    @property
    def isolated(self) -> bool | None:
        """Whether slots are isolated (``None`` until the first host was started)."""
        return self._isolated

    def owner_of(self, host_id: str, index: int) -> tuple[int, int] | None:
        """The (uid, gid) slot ``index`` of ``host_id`` runs as; ``None`` = this process's."""
        if not self._as_root:
            return None
        lo, hi = self.config.uid_range
        uid = lo + zlib.crc32(f"{host_id}/{index}".encode()) % (hi - lo)
        return uid, uid

    async def _probe(self, host: DirectoryHost, binary: str, binds: list[str]) -> None:
        async with self._probe_lock:
            if self._isolated is not None:
                return
            owner = self.owner_of(host.host_id, 0)
            directory = host.workspace_dir(0)
            slot = BwrapSlot(host.host_id, 0, directory, self.config, binary, binds, owner)
            result = await slot.exec("echo ok", timeout=30)
            self._isolated = result.exit_code == 0 and result.stdout.strip() == "ok"
            self._probe_error = result.stderr.strip() or result.stdout.strip()
            if not self._isolated and not self.config.require_isolation:
                logger.warning(
                    "hermes-sandbox: bwrap cannot run here (%s); falling back to UNISOLATED "
                    "local subprocesses because require_isolation=False",
                    self._probe_error,
                )

    async def start_host(self, spec: HostSpec) -> Host:
        try:
            binary = bwrap_binary()
            binds = system_binds(self.config.rootfs)
        except IsolationUnavailable:
            if self.config.require_isolation:
                raise
            binary, binds = "", []
            self._isolated = False

        def make_slot(host_id: str, index: int, directory: str) -> BwrapSlot | LocalSlot:
            if self._isolated is False:
                local = LocalConfig(
                    root_dir=self.config.root_dir,
                    limits=self.config.limits,
                    env=self.config.env,
                    max_output_bytes=self.config.max_output_bytes,
                )
                return LocalSlot(host_id, index, directory, local)
            owner = self.owner_of(host_id, index)
            limits = self.config.limits
            cgroup = slot_cgroup(
                self._cgroup_subtree,
                host_id,
                index,
                memory_bytes=limits.slot_memory_bytes,
                max_pids=limits.slot_processes,
                owner=owner,
            )
            return BwrapSlot(host_id, index, directory, self.config, binary, binds, owner, cgroup)

        owner_of = (
            (lambda i: None)
            if self._isolated is False
            else (lambda i: self.owner_of(spec.host_id, i))
        )
        host = await DirectoryHost.create(
            spec,
            self.config.root_dir,
            make_slot,
            owner_of,
            on_remove=lambda: remove_host_cgroups(self._cgroup_subtree, spec.host_id),
        )
        if self._isolated is None:
            try:
                await self._probe(host, binary, binds)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await host.close()
                raise
            if not self._isolated:
                with anyio.CancelScope(shield=True):
                    await host.close()
                if self.config.require_isolation:
                    raise IsolationUnavailable(
                        f"bwrap cannot run on this machine ({self._probe_error}); fix user "
                        "namespaces or pass require_isolation=False to accept no isolation"
                    )
                return await self.start_host(spec)
        return host

    async def sweep_orphans(self, pool_name: str) -> int:
        """Remove dead runs' host directories and cgroups (pools of one name share a root)."""
        return await anyio.to_thread.run_sync(self._sweep, pool_name)

    def _sweep(self, pool_name: str) -> int:
        removed = _host_dirs.sweep(self.config.root_dir, pool_name)
        root = self.config.root_dir
        live = set(os.listdir(root)) if os.path.isdir(root) else set()
        return max(removed, sweep_cgroups(self._cgroup_subtree, pool_name, live))
