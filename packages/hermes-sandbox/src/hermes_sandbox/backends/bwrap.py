"""The ``bwrap`` backend (the default): every command runs in a fresh bubblewrap sandbox.

Each command gets new user/pid/mount/net/ipc/uts namespaces, a read-only view of the host's
system directories (or of a root filesystem directory), a private tmpfs ``/tmp``, and its slot's
workspace as the only writable tree, mounted at ``/workspace``. When hermes runs as root every
slot runs as its own unprivileged uid (so it cannot read root-only host files and RLIMIT_NPROC
binds). All capabilities are dropped; the sandbox dies with its parent.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import zlib
from collections.abc import Mapping

import anyio
import attrs
from hermes_protocols import ExecResult, IsolationUnavailable, SandboxError

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox._process import kill_group, run_command
from hermes_sandbox.backends import _host_dirs, _root_dir
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._root_dir import BIN_DIR, default_root_dir
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends._workspace_fs import note_if_full
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.bwrap_command import bwrap_argv, bwrap_binary, system_binds
from hermes_sandbox.backends.bwrap_seccomp import write_filter
from hermes_sandbox.backends.cgroups import (
    SlotCgroup,
    remove_host_cgroups,
    slot_cgroup,
    subtree_for,
    sweep_cgroups,
)
from hermes_sandbox.backends.directory_host import DirectoryHost, workspace_limit
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.limits import ResourceLimits

WORKSPACE = "/workspace"
PROBE_DIR = ".probe"
_SECCOMP_FD = 3


@attrs.frozen(slots=True)
class BwrapConfig:
    """Settings of the ``bwrap`` backend.

    ``root_dir``: where host directories live (default: per user, see
    :func:`default_root_dir`). ``rootfs``: a directory used as ``/`` (e.g. built by
    debootstrap) instead of the host's system dirs. ``uid_range``: uids handed to slots when
    hermes runs as root. ``binary``: the bwrap to run (default: the bundled one).
    ``seccomp``: load the filter of :mod:`~hermes_sandbox.backends.bwrap_seccomp`.
    ``disable_userns``: slots cannot create nested user namespaces (``unshare -U``).
    """

    root_dir: str = attrs.field(factory=lambda: default_root_dir("bwrap"))
    allow_network: bool = False
    rootfs: str | None = None
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    env: SlotEnv = attrs.field(factory=SlotEnv)
    max_output_bytes: int = 1 << 20
    uid_range: tuple[int, int] = (200_000, 265_000)
    binary: str | None = None
    seccomp: bool = True
    disable_userns: bool = True


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
        seccomp_file: str | None = None,
    ) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._seccomp_file = seccomp_file
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
            seccomp_fd=_SECCOMP_FD if self._seccomp_file is not None else None,
            disable_userns=self._config.disable_userns,
            tmp_size_bytes=self._config.limits.disk_bytes,
        )
        # Join the slot's cgroups before bwrap starts, so every process is inside them; open
        # the seccomp program as the descriptor bwrap reads it from.
        steps = (
            [f"echo $$ > {shlex.quote(f)}" for f in self._cgroup.procs_files]
            if (self._cgroup is not None)
            else []
        )
        if self._seccomp_file is not None:
            steps.append(f"exec {_SECCOMP_FD}< {shlex.quote(self._seccomp_file)}")
        if steps:
            argv = ["sh", "-c", " && ".join([*steps, 'exec "$0" "$@"']), *argv]
        user, group = self._owner if self._owner is not None else (None, None)
        result = await run_command(
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
        return await note_if_full(result, self._dir, self._config.limits.disk_bytes)

    def kill_all(self) -> None:
        for pgid in list(self._running):
            kill_group(pgid)
        if self._cgroup is not None:
            self._cgroup.kill_all()
        _host_dirs.kill_marked(self._marker)


class BwrapBackend:
    """Starts :class:`DirectoryHost` hosts whose slots are :class:`BwrapSlot`.

    Before anything else (the pool's orphan sweep at its start, or the first host) the backend
    prepares its root, makes bwrap reachable for the slot uids and runs one sandboxed probe;
    when bwrap cannot run it raises :class:`~hermes_protocols.IsolationUnavailable` with the
    reason. There is no unisolated fallback: the ``local`` backend is the explicit opt-out.
    """

    def __init__(self, config: BwrapConfig | None = None) -> None:
        self.config = config or BwrapConfig()
        lo, hi = self.config.uid_range
        if not 0 < lo < hi:
            raise ValueError(f"uid_range must be (low, high) with 0 < low < high, got {lo, hi}")
        self._as_root = os.geteuid() == 0
        self._cgroup_subtree = subtree_for(self.config.root_dir)
        self._ready_lock = anyio.Lock()
        self._binary = ""
        self._binds: list[str] = []
        self._seccomp_file: str | None = None
        self._workspace_bytes: int | None = None
        self._ready = False

    @property
    def name(self) -> str:
        return "bwrap"

    def owner_of(self, host_id: str, index: int) -> tuple[int, int] | None:
        """The (uid, gid) slot ``index`` of ``host_id`` runs as; ``None`` = this process's."""
        if not self._as_root:
            return None
        lo, hi = self.config.uid_range
        uid = lo + zlib.crc32(f"{host_id}/{index}".encode()) % (hi - lo)
        return uid, uid

    def _prepare(self) -> str:
        root = self.config.root_dir
        _root_dir.prepare_root(root, traversable=self._as_root)
        binary = self.config.binary or bwrap_binary()
        if self._as_root:
            binary = _root_dir.reachable_binary(binary, root)
        self._binds = system_binds(self.config.rootfs)
        self._binary = binary
        if self.config.seccomp:
            self._seccomp_file = write_filter(os.path.join(root, BIN_DIR))
            os.chmod(os.path.join(root, BIN_DIR), 0o755)
        self._workspace_bytes = workspace_limit(root, self.config.limits.disk_bytes)
        probe = os.path.join(root, f"{PROBE_DIR}-{os.getpid()}")
        _host_dirs.empty_dir(probe, self.owner_of(PROBE_DIR, 0))
        return probe

    async def ensure_ready(self) -> None:
        """Check once that bwrap runs here; raise ``IsolationUnavailable`` saying why not."""
        async with self._ready_lock:
            if self._ready:
                return
            try:
                probe = await anyio.to_thread.run_sync(self._prepare)
            except OSError as exc:
                raise IsolationUnavailable(f"cannot prepare the bwrap sandbox: {exc}") from exc
            try:
                slot = BwrapSlot(
                    PROBE_DIR,
                    0,
                    probe,
                    self.config,
                    self._binary,
                    self._binds,
                    self.owner_of(PROBE_DIR, 0),
                    seccomp_file=self._seccomp_file,
                )
                try:
                    result = await slot.exec("echo ok", timeout=30)
                except SandboxError as exc:
                    raise IsolationUnavailable(f"bwrap cannot start here: {exc}") from exc
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(remove_tree, probe)
            if result.exit_code != 0 or result.stdout.strip() != "ok":
                reason = (result.stderr.strip() or result.stdout.strip()).splitlines()
                raise IsolationUnavailable(
                    f"bwrap cannot run on this machine ({reason[-1] if reason else 'no output'}, "
                    f"exit {result.exit_code}); enable unprivileged user namespaces, or choose "
                    "the 'local' backend to run WITHOUT isolation"
                )
            self._ready = True

    async def start_host(self, spec: HostSpec) -> Host:
        await self.ensure_ready()

        def make_slot(host_id: str, index: int, directory: str) -> BwrapSlot:
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
            return BwrapSlot(
                host_id,
                index,
                directory,
                self.config,
                self._binary,
                self._binds,
                owner,
                cgroup,
                seccomp_file=self._seccomp_file,
            )

        return await DirectoryHost.create(
            spec,
            self.config.root_dir,
            make_slot,
            lambda i: self.owner_of(spec.host_id, i),
            on_remove=lambda: remove_host_cgroups(self._cgroup_subtree, spec.host_id),
            workspace_bytes=self._workspace_bytes,
        )

    async def sweep_orphans(self, pool_name: str) -> int:
        """Check bwrap runs (so a pool fails at its start), then remove dead runs' leftovers."""
        await self.ensure_ready()
        return await anyio.to_thread.run_sync(self._sweep, pool_name)

    def _sweep(self, pool_name: str) -> int:
        removed = _host_dirs.sweep(self.config.root_dir, pool_name)
        root = self.config.root_dir
        live = set(os.listdir(root)) if os.path.isdir(root) else set()
        return max(removed, sweep_cgroups(self._cgroup_subtree, pool_name, live))
