"""The ``gvisor`` backend: one gVisor sandbox per slot (``runsc``), so the host kernel is not
the boundary: a slot's system calls are served by gVisor's own kernel in user space.

A host is ``slots`` sandboxes started with ``runsc run --detach`` from an OCI bundle
(:mod:`~hermes_sandbox.backends.gvisor_spec`) over a read-only root filesystem directory
(``GvisorConfig.rootfs``: e.g. a ``docker export`` of an image, or a debootstrap tree), each with
``hermes-exec`` as PID 1 and its writable directories on this machine (see
:mod:`~hermes_sandbox.backends.agent_host`). The agent reaches its control socket through
``--host-uds=open`` (it may connect to host sockets bound into the sandbox: only that one, which
is unlinked once it is connected). There is no network. Sandbox state lives under
``<root_dir>/.runsc``; a sweep deletes the sandboxes of hosts whose owning process is dead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, IsolationUnavailable, SandboxError

from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._root_dir import (
    BIN_DIR,
    default_root_dir,
    prepare_root,
    registered_roots,
)
from hermes_sandbox.backends.agent_host import AgentHost, AgentHostSettings, SlotPaths
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.cgroups import CGROUP_FS, subtree_for
from hermes_sandbox.backends.directory_host import workspaces_mountable
from hermes_sandbox.backends.gvisor_spec import oci_spec
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.budget import MachineBudget, fit_limits
from hermes_sandbox.cleanup import Removed, hosts_removed, sweep_directories
from hermes_sandbox.executor import agent_binary
from hermes_sandbox.file_window import DEFAULT_MAX_READ_BYTES
from hermes_sandbox.limits import ResourceLimits

STATE_DIR = ".runsc"
"""Under a gvisor root: runsc's state of every sandbox the backend started."""
_CLI_TIMEOUT_S = 120.0
_LOG = "runsc.log"


@attrs.frozen(slots=True, kw_only=True)
class GvisorConfig:
    """Settings of the ``gvisor`` backend.

    ``rootfs``: the directory used as every sandbox's read-only ``/`` (it needs bash; its top
    directory must be world-traversable). ``runsc``: the runsc binary (0.0~20240729 or newer:
    older ones fail coreutils' ``statx``). ``platform``: runsc's ``--platform`` (default: its
    own, systrap). ``limits``, ``uid_range``, ``executor_binary``: as for docker. There is no
    network in a gvisor slot. ``cli_timeout_s``: how long one runsc call (run, delete, state)
    may take; a ``delete`` over it kills the sandbox's processes through its cgroup instead.
    """

    rootfs: str
    runsc: str = "runsc"
    platform: str | None = None
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    uid_range: tuple[int, int] = _host_dirs.SLOT_UID_RANGE
    workspace: str = "/workspace"
    root_dir: str = attrs.field(factory=lambda: default_root_dir("gvisor"))
    env: SlotEnv = attrs.field(factory=SlotEnv)
    executor_binary: str | None = None
    max_output_bytes: int = 1 << 20
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    start_timeout_s: float = 120.0
    cli_timeout_s: float = _CLI_TIMEOUT_S

    def __attrs_post_init__(self) -> None:
        if not os.path.isabs(self.rootfs):
            raise ConfigError(f"GvisorConfig.rootfs must be an absolute path, got {self.rootfs!r}")
        if not os.path.isabs(self.workspace) or os.path.normpath(self.workspace) == "/":
            raise ConfigError("GvisorConfig.workspace must be an absolute path below /")


class _Runsc:
    """runsc with one state root (``<root_dir>/.runsc``)."""

    def __init__(self, binary: str, root_dir: str, timeout_s: float = _CLI_TIMEOUT_S) -> None:
        self.binary = binary
        self.root_dir = root_dir
        self.timeout_s = timeout_s
        self.state = f"--root={os.path.join(root_dir, STATE_DIR)}"

    async def __call__(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        try:
            with anyio.fail_after(self.timeout_s):
                return await anyio.run_process([self.binary, self.state, *args], check=False)
        except TimeoutError as exc:
            raise SandboxError(f"`runsc {args[0]}` did not end in {self.timeout_s:.0f}s") from exc
        except OSError as exc:
            raise IsolationUnavailable(f"cannot run runsc ({self.binary!r}): {exc}") from exc


class _Sandbox:
    """One slot sandbox, known by its runsc container id; its bundle goes with it."""

    def __init__(self, runsc: _Runsc, name: str, bundle: str | None = None) -> None:
        self._runsc = runsc
        self._name = name
        self._bundle = bundle

    async def remove(self) -> None:
        """Delete the sandbox. When ``runsc delete`` itself starves (a machine loaded past its
        cores), its processes are killed through the sandbox's cgroup first, so a sandbox never
        outlives its slot burning CPU; runsc then only has its state to remove."""
        with anyio.CancelScope(shield=True):
            try:
                await self._runsc("delete", "--force", self._name)
            except SandboxError:
                root_dir = self._runsc.root_dir
                await anyio.to_thread.run_sync(kill_sandbox_processes, root_dir, self._name)
                await self._runsc("delete", "--force", self._name)
            if self._bundle is not None:
                await anyio.to_thread.run_sync(remove_tree, self._bundle)

    async def running(self) -> bool:
        done = await self._runsc("state", self._name)
        if done.returncode != 0:
            return False
        state: dict[str, Any] = json.loads(done.stdout)
        return state.get("status") in ("created", "running")


def _write_bundle(bundle: str, spec: dict[str, Any]) -> int:
    """Write ``<bundle>/config.json``; a descriptor of ``<bundle>/runsc.log``, where runsc and
    the sandbox write (the sandbox keeps runsc's stdio: never a pipe anything waits on)."""
    os.makedirs(bundle, mode=0o700, exist_ok=True)
    with open(os.path.join(bundle, "config.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)
    return os.open(os.path.join(bundle, _LOG), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


class _GvisorRuntime:
    """Launches slot sandboxes of one backend (a :class:`SandboxRuntime`)."""

    def __init__(self, backend: GvisorBackend, agent: str) -> None:
        self._backend = backend
        self._agent = agent

    async def prepare_workspace(self, paths: SlotPaths, owner: tuple[int, int]) -> None:
        """Nothing: a gvisor slot starts with an empty workspace."""

    async def host_closed(self, host: HostSpec) -> None:
        root_dir = self._backend.config.root_dir
        await anyio.to_thread.run_sync(remove_host_cgroups, root_dir, host.host_id)

    async def launch(
        self, name: str, host: HostSpec, paths: SlotPaths, owner: tuple[int, int]
    ) -> _Sandbox:
        config = self._backend.config
        spec = oci_spec(
            rootfs=config.rootfs,
            workspace=config.workspace,
            paths=paths,
            agent=self._agent,
            path_env=config.env.path,
            limits=self._backend.limits,
            cgroups_path=f"{subtree_for(config.root_dir)}/{host.host_id}/{name}",
        )
        bundle = os.path.join(config.root_dir, host.host_id, "bundles", name)
        log = await anyio.to_thread.run_sync(_write_bundle, bundle, spec)
        sandbox = _Sandbox(self._backend.runsc, name, bundle)
        flags = ["--network=none", "--host-uds=open", "--overlay2=none"]
        flags += [f"--platform={config.platform}"] if config.platform else []
        argv = [config.runsc, self._backend.runsc.state, *flags, "run", "--detach"]
        try:
            try:
                with anyio.fail_after(config.cli_timeout_s):
                    done = await anyio.run_process(
                        [*argv, "--bundle", bundle, name],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        check=False,
                    )
            finally:
                os.close(log)
            if done.returncode != 0:
                last = await _last_line(os.path.join(bundle, _LOG))
                raise SandboxError(f"runsc run {name} failed: {last}")
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await sandbox.remove()
            if isinstance(exc, TimeoutError):
                raise SandboxError(f"runsc run {name} did not return in time") from exc
            raise
        return sandbox


async def _last_line(path: str) -> str:
    text = await anyio.Path(path).read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


def _cgroup_dirs(relative: str) -> list[str]:
    """Where runsc makes a relative ``cgroupsPath``: below this process's cgroup in every v1
    hierarchy."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    dirs = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        mount = os.path.join(CGROUP_FS, controllers.removeprefix("name="))
        if controllers and os.path.isdir(mount):
            dirs.append(os.path.normpath(f"{mount}/{path}/{relative}"))
    return dirs


def kill_sandbox_processes(root_dir: str, sandbox_name: str) -> int:
    """SIGKILL every process in the cgroup of sandbox ``sandbox_name`` (its sentry, gofer and
    stubs); how many were signalled. Blocking."""
    relative = f"{subtree_for(root_dir)}/{_host_of(sandbox_name)}/{sandbox_name}"
    pids: set[int] = set()
    for cgroup in _cgroup_dirs(relative):
        procs = os.path.join(cgroup, "cgroup.procs")
        with contextlib.suppress(OSError), open(procs, encoding="ascii") as f:
            pids.update(int(line) for line in f if line.strip())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def remove_host_cgroups(root_dir: str, host_id: str) -> None:
    """Remove the cgroups runsc made for ``host_id``'s sandboxes (the host's directory in every
    hierarchy, once runsc removed its sandboxes' own). Blocking."""
    subtree = subtree_for(root_dir)
    for host_dir in _cgroup_dirs(f"{subtree}/{host_id}"):
        if not os.path.isdir(host_dir):
            continue
        for name in os.listdir(host_dir):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(host_dir, name))
        for path in (host_dir, os.path.dirname(host_dir)):  # the subtree, once empty
            with contextlib.suppress(OSError):
                os.rmdir(path)


def _host_of(sandbox_name: str) -> str:
    """The host id a sandbox was started for (``<host_id>-<slot>-<suffix>``)."""
    return sandbox_name.rsplit("-", 2)[0]


async def remove_dead_sandboxes(
    runsc: str, root_dir: str, *, dry_run: bool = False
) -> list[Removed]:
    """Delete the sandboxes under ``root_dir`` whose host's owning process is gone."""
    cli = _Runsc(runsc, root_dir)
    done = await cli("list", "--quiet")
    if done.returncode != 0:
        return []
    removed = []
    for name in done.stdout.decode().split():
        if _host_dirs.host_alive(os.path.join(root_dir, _host_of(name))):
            continue
        if not dry_run:
            await _Sandbox(cli, name).remove()
            await anyio.to_thread.run_sync(remove_host_cgroups, root_dir, _host_of(name))
        removed.append(Removed("sandbox", name))
    return removed


class GvisorSweeper:
    """The leftovers of dead gvisor pools (``hermes-sandbox cleanup``): their sandboxes in
    every registered root holding runsc state (directories: the directory sweeper)."""

    def __init__(self, runsc: str = "runsc") -> None:
        self._runsc = runsc

    @property
    def name(self) -> str:
        return "gvisor sandboxes"

    async def sweep(self, *, dry_run: bool) -> list[Removed]:
        removed: list[Removed] = []
        for root in await anyio.to_thread.run_sync(_gvisor_roots):
            try:
                removed += await remove_dead_sandboxes(self._runsc, root, dry_run=dry_run)
            except IsolationUnavailable as exc:  # gVisor gone from this machine, or elsewhere
                removed.append(Removed("skipped", f"gvisor sandboxes under {root}: {exc}"))
        return removed


def _gvisor_roots() -> list[str]:
    """Registered roots whose runsc state directory holds anything."""
    return [r for r in registered_roots() if _listing(os.path.join(r, STATE_DIR))]


def _listing(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _check_rootfs(rootfs: str) -> None:
    try:
        info = os.stat(rootfs)
    except OSError as exc:
        raise ConfigError(f"GvisorConfig.rootfs {rootfs!r}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o001 == 0:
        raise ConfigError(
            f"GvisorConfig.rootfs {rootfs!r} must be a directory others may enter (mode "
            f"{oct(stat.S_IMODE(info.st_mode))}): slots run as unprivileged users; chmod 755 it"
        )


class GvisorBackend:
    """Starts :class:`AgentHost` hosts of gVisor sandboxes; sweeps what dead pools left.

    Needs root (runsc creates namespaces and cgroups). Before anything else (the pool's orphan
    sweep at its start) the backend checks runsc and the root filesystem and builds the
    executor: a pool fails at its start, with why, where gVisor cannot run.
    """

    def __init__(self, config: GvisorConfig) -> None:
        self.config = config
        self.limits = config.limits
        self.runsc = _Runsc(config.runsc, config.root_dir, config.cli_timeout_s)
        self._lock = anyio.Lock()
        self._settings: AgentHostSettings | None = None

    @property
    def name(self) -> str:
        return "gvisor"

    def fit_budget(self, budget: MachineBudget, slots: int) -> list[str]:
        """Clamp the slot limits so ``slots`` slots fit ``budget``; what changed."""
        self.limits, notes = fit_limits(self.config.limits, budget, slots, disk_in_memory=True)
        return notes

    def _prepare(self) -> tuple[str, bool]:
        _check_rootfs(self.config.rootfs)
        root = self.config.root_dir
        prepare_root(root, traversable=False)
        agent = agent_binary(os.path.join(root, BIN_DIR), self.config.executor_binary)
        return agent, workspaces_mountable(root, self.config.limits.disk_bytes)

    async def ensure_ready(self) -> AgentHostSettings:
        async with self._lock:
            if self._settings is not None:
                return self._settings
            if os.geteuid() != 0:
                raise IsolationUnavailable("the gvisor backend needs root (runsc does)")
            version = await self.runsc("--version")
            if version.returncode != 0:
                text = version.stderr.decode(errors="replace").strip()
                raise IsolationUnavailable(f"runsc ({self.config.runsc}) does not run: {text}")
            agent, mount_slots = await anyio.to_thread.run_sync(self._prepare)
            config = self.config
            self._settings = AgentHostSettings(
                runtime=_GvisorRuntime(self, agent),
                root_dir=config.root_dir,
                workspace=config.workspace,
                limits=config.limits,
                env=config.env,
                uid_range=config.uid_range,
                slot_user=None,
                as_root=True,
                switch_user=True,
                mount_slots=mount_slots,
                restore_in_place=True,
                max_output_bytes=config.max_output_bytes,
                max_read_bytes=config.max_read_bytes,
                start_timeout_s=config.start_timeout_s,
            )
            return self._settings

    async def start_host(self, spec: HostSpec) -> Host:
        settings = await self.ensure_ready()
        return await AgentHost.create(spec, attrs.evolve(settings, limits=self.limits))

    async def sweep_orphans(self, pool_name: str) -> int:
        """Remove sandboxes and directories of dead pools (any name; never a live pool's)."""
        await self.ensure_ready()
        sandboxes = await remove_dead_sandboxes(self.config.runsc, self.config.root_dir)
        removed = await anyio.to_thread.run_sync(sweep_directories, [self.config.root_dir])
        return max(hosts_removed(removed), len({_host_of(r.what) for r in sandboxes}))
