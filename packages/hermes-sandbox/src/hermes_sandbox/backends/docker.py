"""The ``docker`` backend: one container per slot, its workspace a directory on this machine.

A host is ``slots`` containers (see :mod:`~hermes_sandbox.backends.docker_config` for how each
is locked down) and their workspaces ``<root_dir>/<host_id>/slots/<i>``, bind-mounted at
``DockerConfig.workspace``. Files are read and written on the host side with the same
``O_NOFOLLOW`` walk as bwrap's (so a download never lands a symlink, a device or a setuid bit
on this machine); commands run through ``docker exec`` with their output streamed into a
bounded buffer. A reset replaces the slot's container by a fresh one of the image and its
workspace by an empty one: nothing of the last trajectory survives (files, processes, the
image's filesystem). Containers end with their pool (see
:mod:`~hermes_sandbox.backends.docker_container`) and carry its owner, so a pool never
removes another live pool's containers. The Docker daemon must run on this machine.
"""

from __future__ import annotations

import logging
import os
import posixpath
import uuid
from collections.abc import Mapping

import anyio
import attrs
from hermes_protocols import ConfigError, ExecResult, SandboxError

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox._process import run_command
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._container_exec import TIMEOUT_EXIT, exec_argv
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._root_dir import prepare_root
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends._workspace_fs import note_if_full, unmount_beneath
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.directory_host import workspace_limit
from hermes_sandbox.backends.docker_cli import (
    docker_available,
    docker_cli,
    error_text,
    storage_opt_supported,
)
from hermes_sandbox.backends.docker_config import (
    HOST_LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    DockerConfig,
    run_argv,
)
from hermes_sandbox.backends.docker_container import AttachedContainer, keeper_main

__all__ = [
    "HOST_LABEL",
    "OWNER_LABEL",
    "POOL_LABEL",
    "DockerBackend",
    "DockerConfig",
    "DockerHost",
    "DockerSlot",
    "docker_available",
]

logger = logging.getLogger(__name__)
_GRACE_S = 15.0
# Run as the slot's user in its container: kill every process but PID 1 and this shell, empty
# the container's tmpfs mounts and System V IPC. With a read-only image and no privileges,
# these and the workspace are all the slot could change.
_RESTORE = r"""kill -9 -1 2>/dev/null
for d in /tmp /var/tmp /dev/shm /dev/mqueue; do
  [ -d "$d" ] || continue
  chmod -R u+rwx -- "$d" 2>/dev/null
  rm -rf -- "$d"/..?* "$d"/.[!.]* "$d"/* 2>/dev/null
done
ipcrm --all 2>/dev/null
exit 0
"""


class DockerSlot(HostFilesSlot):
    """One slot container; its files are accessed on the host side of its workspace."""

    def __init__(self, host: DockerHost, index: int, directory: str) -> None:
        self._host = host
        self._index = index
        self._slot_id = f"{host.host_id}/{index}"
        self._marker = f"{self._slot_id}/"
        self.directory = directory
        config = host.backend.config
        self._files = WorkspaceFiles(directory, config.workspace, host.owner, config.max_read_bytes)
        self.container: AttachedContainer | None = None
        self.lock = anyio.Lock()
        """Held while the container is replaced or stopped (a reset racing the host's close)."""

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return self._host.backend.config.workspace

    def _cwd(self, cwd: str | None) -> str:
        """Relative ``cwd`` stays in the workspace; an absolute one may be anywhere in the
        container, which is the sandbox (e.g. a task image's ``/app``)."""
        if cwd is None:
            return self.workspace
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return posixpath.join(self.workspace, relative_slot_path(cwd, self.workspace))

    def _live(self) -> AttachedContainer:
        if self.container is None or not self.container.alive:
            raise SandboxError(f"slot {self.slot_id}: its container is gone; the pool replaces it")
        return self.container

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        config = self._host.backend.config
        workdir = self._cwd(cwd)
        container = self._live()
        await container.renew()
        args = [config.docker, "exec", "-i", "-u", "{}:{}".format(*self._host.user), "-w", workdir]
        for key, value in config.env.build(self.workspace, self._marker, env).items():
            args += ["-e", f"{key}={value}"]
        args += [container.name, *exec_argv(self.slot_id, command, timeout)]
        result = await run_command(
            args, timeout=timeout + _GRACE_S, max_output_bytes=config.max_output_bytes, stdin=stdin
        )
        if result.exit_code != 0 and not await self._running(container):
            raise SandboxError(f"slot {self.slot_id}: its container is gone; the pool replaces it")
        if result.exit_code == TIMEOUT_EXIT:
            result = attrs.evolve(result, timed_out=True)
        return await note_if_full(result, self.directory, self._host.workspace_bytes)

    async def _running(self, container: AttachedContainer) -> bool:
        """Whether ``container`` still runs (a failed command may have lost its container)."""
        if not container.alive:
            return False
        args = ["inspect", "-f", "{{.State.Running}}", container.name]
        done = await docker_cli(container.docker, args, timeout=30)
        return done.returncode == 0 and done.stdout.strip() == b"true"

    async def start(self) -> None:
        """Start a fresh container of the image on this slot's workspace."""
        self.container = await self._host.start_container(self._index, self.directory)

    async def stop(self) -> None:
        if self.container is not None:
            await self.container.stop()


class DockerHost:
    """``slots`` containers with host-side workspaces under ``<root_dir>/<host_id>``."""

    def __init__(self, spec: HostSpec, backend: DockerBackend) -> None:
        self._spec = spec
        self.backend = backend
        self.user = backend.user
        self.owner = backend.user if os.geteuid() == 0 else None
        self.workspace_bytes = backend.workspace_bytes
        self._dir = os.path.join(backend.config.root_dir, spec.host_id)
        self._slots = [
            DockerSlot(self, i, os.path.join(self._dir, "slots", str(i))) for i in range(spec.slots)
        ]
        self._closed = False

    @classmethod
    async def create(cls, spec: HostSpec, backend: DockerBackend) -> DockerHost:
        host = cls(spec, backend)
        try:
            await anyio.to_thread.run_sync(host._create_dirs)
            async with anyio.create_task_group() as tg:
                for slot in host._slots:
                    tg.start_soon(slot.start)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await host.close()
            raise
        return host

    def _create_dirs(self) -> None:
        os.makedirs(os.path.join(self._dir, "slots"), mode=0o700)
        _host_dirs.write_owner(self._dir)
        for slot in self._slots:
            _host_dirs.empty_dir(slot.directory, self.owner, self.workspace_bytes)

    @property
    def host_id(self) -> str:
        return self._spec.host_id

    def slot(self, index: int) -> DockerSlot:
        return self._slots[index]

    async def start_container(self, index: int, directory: str) -> AttachedContainer:
        config = self.backend.config
        name = f"{self.host_id}-{index}-{uuid.uuid4().hex[:6]}"
        labels = {
            POOL_LABEL: self._spec.pool_name,
            HOST_LABEL: self.host_id,
            OWNER_LABEL: _host_dirs.owner_token(),
        }
        argv = run_argv(
            config,
            name=name,
            labels=labels,
            user=self.user,
            workspace_dir=directory,
            storage_opt=self.backend.storage_opt,
            main=keeper_main(config.lease_s),
        )
        return await AttachedContainer.start(argv, name, config.start_timeout_s)

    async def reset_slot(self, index: int) -> None:
        slot = self._slots[index]
        async with slot.lock:
            self._check_open()
            if not self.backend.config.recreate_on_reset and await self._restore(slot):
                return
            await slot.stop()
            await anyio.to_thread.run_sync(
                _host_dirs.empty_dir, slot.directory, self.owner, self.workspace_bytes
            )
            self._check_open()
            await slot.start()

    async def _restore(self, slot: DockerSlot) -> bool:
        """Restore ``slot``'s container in place; ``False`` when it cannot (then recreate)."""
        container = slot.container
        if container is None or not container.alive:
            return False
        user = "{}:{}".format(*self.user)
        args = ["exec", "-u", user, container.name, "bash", "-c", _RESTORE]
        done = await docker_cli(container.docker, args, timeout=60)
        if done.returncode != 0 or not container.alive:
            logger.warning("%s: restoring in place failed (%s)", slot.slot_id, error_text(done))
            return False
        await anyio.to_thread.run_sync(_host_dirs.clear_dir, slot.directory, self.owner)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"host {self.host_id} is closed")

    async def healthy(self) -> bool:
        if self._closed:
            return False
        for slot in self._slots:
            if slot.container is None or not await slot.container.renew():
                return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in self._slots:
                    tg.start_soon(self._stop, slot)
            await anyio.to_thread.run_sync(self._remove_dirs)

    @staticmethod
    async def _stop(slot: DockerSlot) -> None:
        async with slot.lock:  # a reset in progress finishes (or fails) first
            await slot.stop()

    def _remove_dirs(self) -> None:
        unmount_beneath(self._dir)
        remove_tree(self._dir)


class DockerBackend:
    """Starts :class:`DockerHost` hosts; sweeps containers and directories of dead pools.

    Before anything else (the pool's orphan sweep at its start) the backend checks that a
    daemon answers and prepares its root; a missing daemon fails the pool's start with why.
    """

    def __init__(self, config: DockerConfig | None = None) -> None:
        self.config = config or DockerConfig()
        self._lock = anyio.Lock()
        self._ready = False
        self.user = (0, 0) if self.config.run_as_root else (self.config.uid, self.config.uid)
        self.workspace_bytes: int | None = None
        self.storage_opt = False

    @property
    def name(self) -> str:
        return "docker"

    def _prepare_root(self) -> None:
        root = self.config.root_dir
        if "," in root or ":" in root:
            raise ConfigError(f"DockerConfig.root_dir {root!r} may not contain ',' or ':'")
        prepare_root(root, traversable=False)
        disk = self.config.disk_mb
        self.workspace_bytes = workspace_limit(root, None if disk is None else disk << 20)

    async def ensure_ready(self) -> None:
        """Check once that a daemon answers; prepare the root; probe ``--storage-opt``."""
        async with self._lock:
            if self._ready:
                return
            reason = await docker_available(self.config.docker)
            if reason is not None:
                raise SandboxError(f"docker backend: {reason}")
            if os.geteuid() != 0:
                if self.config.run_as_root:
                    raise ConfigError(
                        "DockerConfig.run_as_root needs hermes to run as root (the workspace "
                        "must belong to the container's root)"
                    )
                self.user = (os.geteuid(), os.getegid())
            await anyio.to_thread.run_sync(self._prepare_root)
            if not self.config.read_only_rootfs and self.config.disk_mb is not None:
                self.storage_opt = await storage_opt_supported(
                    self.config.docker, self.config.image, self.config.cli_timeout_s
                )
                if not self.storage_opt:
                    logger.warning(
                        "hermes-sandbox: the docker storage driver here cannot limit a "
                        "container's writable layer (--storage-opt size): with "
                        "read_only_rootfs=False a slot can fill the host disk outside its "
                        "workspace and /tmp"
                    )
            self._ready = True

    async def start_host(self, spec: HostSpec) -> Host:
        await self.ensure_ready()
        return await DockerHost.create(spec, self)

    async def sweep_orphans(self, pool_name: str) -> int:
        """Remove containers and workspaces of ``pool_name`` whose owning process is dead."""
        await self.ensure_ready()
        fmt = f'{{{{.Names}}}}\t{{{{.Label "{HOST_LABEL}"}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}'
        args = ["ps", "-a", "--filter", f"label={POOL_LABEL}={pool_name}", "--format", fmt]
        done = await docker_cli(self.config.docker, args, timeout=self.config.cli_timeout_s)
        if done.returncode != 0:
            raise SandboxError(f"docker ps failed: {error_text(done)}")
        rows = [line.split("\t") for line in done.stdout.decode().splitlines() if line]
        dead = [row for row in rows if len(row) == 3 and not _host_dirs.token_alive(row[2])]
        if dead:
            names = [row[0] for row in dead]
            await docker_cli(self.config.docker, ["rm", "-f", *names], timeout=300)
        dirs = await anyio.to_thread.run_sync(_host_dirs.sweep, self.config.root_dir, pool_name)
        return max(len({row[1] for row in dead}), dirs)
