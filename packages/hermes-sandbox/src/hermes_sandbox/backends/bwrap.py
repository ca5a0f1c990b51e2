"""The ``bwrap`` backend (the default): every slot is a long-lived bubblewrap sandbox.

A slot's sandbox has new user/pid/mount/net/ipc/uts namespaces, a read-only view of the host's
system directories (or of a root filesystem directory), its own ``/tmp`` and ``/dev/shm``, and
its workspace as the only other writable tree, mounted at ``/workspace``. Commands are started
by the sandbox's agent (``hermes-exec``), each in a pid namespace of its own that dies with it.
When hermes runs as root every slot runs as its own unprivileged uid (so it cannot read
root-only host files and RLIMIT_NPROC binds). Commands have no capabilities; the sandbox dies
with its parent.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import anyio
import attrs
from hermes_protocols import IsolationUnavailable, SandboxError

from hermes_sandbox.backends import _host_dirs, _root_dir
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._root_dir import BIN_DIR, default_root_dir
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.bwrap_command import bwrap_binary, system_binds
from hermes_sandbox.backends.bwrap_seccomp import compile_filters
from hermes_sandbox.backends.bwrap_slot import WORKSPACE, BwrapSlot, SandboxSetup
from hermes_sandbox.backends.cgroups import (
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

__all__ = ["WORKSPACE", "BwrapBackend", "BwrapConfig", "BwrapSlot"]

PROBE_DIR = ".probe"


@attrs.frozen(slots=True)
class BwrapConfig:
    """Settings of the ``bwrap`` backend.

    ``root_dir``: where host directories live (default: per user, see
    :func:`default_root_dir`). ``rootfs``: a directory used as ``/`` (e.g. built by
    debootstrap) instead of the host's system dirs. ``uid_range``: uids handed to slots when
    hermes runs as root. ``binary``: the bwrap to run (default: the bundled one).
    ``seccomp``: load the filters of :mod:`~hermes_sandbox.backends.bwrap_seccomp`.
    ``disable_userns``: slots cannot create nested user namespaces (``unshare -U``).
    ``executor_binary``: a prebuilt ``hermes-exec`` (``hermes-sandbox build-executor``) instead
    of building it here with the machine's C compiler.
    """

    root_dir: str = attrs.field(factory=lambda: default_root_dir("bwrap"))
    allow_network: bool = False
    rootfs: str | None = None
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    env: SlotEnv = attrs.field(factory=SlotEnv)
    max_output_bytes: int = 1 << 20
    uid_range: tuple[int, int] = _host_dirs.SLOT_UID_RANGE
    binary: str | None = None
    seccomp: bool = True
    disable_userns: bool = True
    executor_binary: str | None = None


def _cannot_run(reason: str) -> IsolationUnavailable:
    return IsolationUnavailable(
        f"bwrap cannot run on this machine ({reason}); enable unprivileged user namespaces, or "
        "choose the 'local' backend to run WITHOUT isolation"
    )


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
        self._setup: SandboxSetup | None = None
        self._limits = self.config.limits
        # Threads that never exit while the process lives: a sandbox dies with the thread that
        # started it (bwrap's --die-with-parent is a per-thread PR_SET_PDEATHSIG).
        self._spawner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hermes-bwrap-spawn")

    @property
    def name(self) -> str:
        return "bwrap"

    def fit_budget(self, budget: MachineBudget, slots: int) -> list[str]:
        """Clamp the slot limits so ``slots`` slots fit ``budget``; what changed."""
        self._limits, notes = fit_limits(
            self.config.limits, budget, slots, disk_in_memory=self._as_root
        )
        return notes

    def owner_of(self, host_id: str, index: int) -> tuple[int, int] | None:
        """The (uid, gid) slot ``index`` of ``host_id`` runs as; ``None`` = this process's."""
        if not self._as_root:
            return None
        return _host_dirs.slot_owner(f"{host_id}/{index}", self.config.uid_range)

    def _prepare(self) -> tuple[SandboxSetup, str]:
        config = self.config
        root = config.root_dir
        _root_dir.prepare_root(root, traversable=self._as_root)
        binary = config.binary or bwrap_binary()
        if self._as_root:
            binary = _root_dir.reachable_binary(binary, root)
        bin_dir = os.path.join(root, BIN_DIR)
        agent = agent_binary(bin_dir, config.executor_binary)
        os.chmod(bin_dir, 0o755)
        filters = compile_filters() if config.seccomp else (None, None)
        mount_slots = workspaces_mountable(root, config.limits.disk_bytes)
        setup = SandboxSetup(
            binary=binary,
            binds=tuple(system_binds(config.rootfs)),
            agent=agent,
            agent_filter=filters[0],
            command_filter=filters[1],
            limits=self._limits,
            env=config.env,
            max_output_bytes=config.max_output_bytes,
            spawner=self._spawner,
            allow_network=config.allow_network,
            disable_userns=config.disable_userns,
            mount_slots=mount_slots,
        )
        # unique per backend: two pools of one process may start their hosts at once
        probe = os.path.join(root, f"{PROBE_DIR}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        owner = self.owner_of(PROBE_DIR, 0)
        _host_dirs.empty_dir(probe, owner, None, _host_dirs.slot_subdirs(scratch=True))
        return setup, probe

    async def ensure_ready(self) -> SandboxSetup:
        """Check once that bwrap runs here; raise ``IsolationUnavailable`` saying why not."""
        async with self._ready_lock:
            if self._setup is not None:
                return self._setup
            try:
                setup, probe = await anyio.to_thread.run_sync(self._prepare)
            except OSError as exc:
                raise IsolationUnavailable(f"cannot prepare the bwrap sandbox: {exc}") from exc
            slot = BwrapSlot(PROBE_DIR, 0, probe, setup, self.owner_of(PROBE_DIR, 0))
            try:
                result = await slot.exec("echo ok", timeout=30)
            except SandboxError as exc:
                raise _cannot_run(str(exc)) from exc
            finally:
                with anyio.CancelScope(shield=True):
                    await slot.stop()
                    await anyio.to_thread.run_sync(remove_tree, probe)
            if result.exit_code != 0 or result.stdout.strip() != "ok":
                reason = (result.stderr.strip() or result.stdout.strip()).splitlines()
                raise _cannot_run(
                    f"{reason[-1] if reason else 'no output'}, exit {result.exit_code}"
                )
            self._setup = setup
            return setup

    async def start_host(self, spec: HostSpec) -> Host:
        setup = attrs.evolve(await self.ensure_ready(), limits=self._limits)

        def make_slot(host_id: str, index: int, directory: str) -> BwrapSlot:
            owner = self.owner_of(host_id, index)
            limits = setup.limits
            cgroup = slot_cgroup(
                self._cgroup_subtree,
                host_id,
                index,
                memory_bytes=limits.slot_memory_bytes,
                max_pids=limits.slot_processes,
                cpus=limits.slot_cpus,
                owner=owner,
            )
            return BwrapSlot(host_id, index, directory, setup, owner, cgroup)

        return await DirectoryHost.create(
            spec,
            self.config.root_dir,
            make_slot,
            lambda i: self.owner_of(spec.host_id, i),
            on_remove=lambda: remove_host_cgroups(self._cgroup_subtree, spec.host_id),
            workspace_bytes=setup.slot_bytes,
            scratch=True,
        )

    async def sweep_orphans(self, pool_name: str) -> int:
        """Check bwrap runs (so a pool fails at its start), then remove dead runs' leftovers."""
        await self.ensure_ready()
        return await anyio.to_thread.run_sync(self._sweep, pool_name)

    def _sweep(self, pool_name: str) -> int:
        # Any dead pool's leftovers (not only ``pool_name``'s): see hermes_sandbox.cleanup.
        return hosts_removed(sweep_directories([self.config.root_dir]))
