"""The ``docker`` backend: one locked-down container per slot (Docker CLI, daemon on this machine).

A host is ``slots`` containers (see :mod:`~hermes_sandbox.backends.docker_config`), each with
``hermes-exec`` as PID 1 and its writable directories on this machine (see
:mod:`~hermes_sandbox.backends.agent_host`). A host may also run an item's own image
(:meth:`DockerBackend.start_image_host`: one slot, its workspace where the image says, e.g. a
task's ``/app``, holding the image's files there; see
:mod:`~hermes_sandbox.backends.docker_image_files`). Containers carry their owner (pid + start time)
and user in labels: a sweep removes only containers whose owning process is dead, so a pool
never removes another live pool's containers, whatever their names.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, SandboxError, SlotImage

from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._root_dir import BIN_DIR, prepare_root
from hermes_sandbox.backends.agent_host import AgentHost, AgentHostSettings, SlotPaths
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.directory_host import workspaces_mountable
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
    ROOT_LABEL,
    USER_LABEL,
    DockerConfig,
    run_argv,
)
from hermes_sandbox.backends.docker_image_files import ImageFiles
from hermes_sandbox.backends.docker_images import DockerImages
from hermes_sandbox.budget import MachineBudget, fit_limits
from hermes_sandbox.cleanup import Removed, hosts_removed, sweep_directories
from hermes_sandbox.executor import agent_binary

__all__ = [
    "HOST_LABEL",
    "OWNER_LABEL",
    "POOL_LABEL",
    "ROOT_LABEL",
    "USER_LABEL",
    "DockerBackend",
    "DockerConfig",
    "DockerSweeper",
    "docker_available",
]

logger = logging.getLogger(__name__)
_REMOVE_TIMEOUT_S = 120.0


class _Container:
    """One slot container, known by name."""

    def __init__(self, docker: str, name: str) -> None:
        self._docker = docker
        self._name = name

    async def remove(self) -> None:
        with anyio.CancelScope(shield=True):
            await docker_cli(self._docker, ["rm", "-f", self._name], timeout=_REMOVE_TIMEOUT_S)
            for _ in range(int(_REMOVE_TIMEOUT_S / 0.1)):
                if not await self._exists():
                    return
                await anyio.sleep(0.1)  # Docker was already removing it (--rm): wait for it

    async def _exists(self) -> bool:
        done = await docker_cli(self._docker, ["inspect", "-f", "1", self._name], timeout=30)
        return done.returncode == 0

    async def running(self) -> bool:
        args = ["inspect", "-f", "{{.State.Running}}", self._name]
        done = await docker_cli(self._docker, args, timeout=30)
        return done.returncode == 0 and done.stdout.strip() == b"true"


@attrs.frozen(slots=True, kw_only=True)
class _DockerRuntime:
    """Launches the slot containers of one image (a :class:`SandboxRuntime`)."""

    backend: DockerBackend
    agent: str
    storage_opt: bool
    image: str
    workspace: str
    read_only: bool
    copy_workdir: bool = False
    """Fill each new workspace with the image's files at ``workspace`` (an item's own image)."""

    async def prepare_workspace(self, paths: SlotPaths, owner: tuple[int, int]) -> None:
        if self.copy_workdir:
            async with ImageFiles(self.backend.config.docker, self.image) as files:
                await files.copy_dir(self.workspace, paths.workspace, owner)

    async def host_closed(self, host: HostSpec) -> None:
        """Nothing: a container leaves nothing outside itself and its slot directories."""

    async def launch(
        self, name: str, host: HostSpec, paths: SlotPaths, owner: tuple[int, int]
    ) -> _Container:
        config = self.backend.config
        labels = {
            POOL_LABEL: host.pool_name,
            HOST_LABEL: host.host_id,
            USER_LABEL: str(os.geteuid()),
            OWNER_LABEL: _host_dirs.owner_token(),
            ROOT_LABEL: config.root_label,
        }
        argv = run_argv(
            config,
            image=self.image,
            workspace=self.workspace,
            read_only=self.read_only,
            name=name,
            labels=labels,
            user=owner,
            paths=paths,
            agent=self.agent,
            limits=self.backend.limits,
            storage_opt=self.storage_opt,
        )
        done = await docker_cli(config.docker, argv[1:], timeout=config.cli_timeout_s)
        if done.returncode != 0:
            with anyio.CancelScope(shield=True):  # `docker run` may have created it anyway
                await _Container(config.docker, name).remove()
            raise SandboxError(f"docker run {self.image} failed: {error_text(done)}")
        return _Container(config.docker, name)


async def _dead_containers(docker: str, filters: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(name, host id)`` of containers matching the label ``filters`` whose owner is dead."""
    fmt = f'{{{{.Names}}}}\t{{{{.Label "{HOST_LABEL}"}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}'
    args = ["ps", "-a", "--format", fmt]
    for key, value in filters.items():
        args += ["--filter", f"label={key}={value}"]
    done = await docker_cli(docker, args, timeout=120)
    if done.returncode != 0:
        raise SandboxError(f"docker ps failed: {error_text(done)}")
    rows = [line.split("\t") for line in done.stdout.decode().splitlines() if line.count("\t") == 2]
    return [(name, host) for name, host, owner in rows if not _host_dirs.token_alive(owner)]


async def remove_dead_containers(
    docker: str, *, root_dir: str | None = None, dry_run: bool = False
) -> list[Removed]:
    """Remove this user's hermes containers whose owning process is gone (any pool; only those
    started under ``root_dir`` when it is given)."""
    filters = {USER_LABEL: str(os.geteuid())}
    if root_dir is not None:
        filters[ROOT_LABEL] = root_dir
    dead = await _dead_containers(docker, filters)
    if dead and not dry_run:
        done = await docker_cli(docker, ["rm", "-f", *(n for n, _ in dead)], timeout=300)
        if done.returncode != 0:
            return [Removed("skipped", f"containers: {error_text(done)}")]
    return [Removed("container", name) for name, _ in dead]


class DockerSweeper:
    """The leftovers of dead docker pools (``hermes-sandbox cleanup``): their containers (their
    directories are found by the directory sweeper)."""

    def __init__(self, docker: str = "docker") -> None:
        self._docker = docker

    @property
    def name(self) -> str:
        return "docker containers"

    async def sweep(self, *, dry_run: bool) -> list[Removed]:
        if await docker_available(self._docker) is not None:
            return []
        return await remove_dead_containers(self._docker, dry_run=dry_run)


@attrs.frozen(slots=True)
class _Ready:
    """What the backend learned once, before its first host."""

    agent: str
    mount_slots: bool
    as_root: bool


class DockerBackend:
    """Starts :class:`AgentHost` hosts of docker containers (of ``config.image``, or of an
    item's own image); sweeps what dead pools left.

    Before anything else (the pool's orphan sweep at its start) the backend checks that a
    daemon answers, prepares its root and builds the executor; a missing daemon or compiler
    fails the pool's start with why. Images are found, pulled or built by
    :mod:`~hermes_sandbox.backends.docker_images` when a host first needs them.
    """

    def __init__(self, config: DockerConfig | None = None) -> None:
        self.config = config or DockerConfig()
        self.limits = self.config.limits
        self._lock = anyio.Lock()
        self._ready: _Ready | None = None
        self._storage_opt: bool | None = None
        self._users: dict[str, tuple[int, int]] = {}
        self._images = DockerImages(
            self.config.docker,
            dict(self.config.image_aliases),
            pull_timeout_s=self.config.pull_timeout_s,
            alias_option=self.config.alias_option,
        )

    @property
    def name(self) -> str:
        return "docker"

    def fit_budget(self, budget: MachineBudget, slots: int) -> list[str]:
        """Clamp the slot limits so ``slots`` slots fit ``budget``; what changed."""
        self.limits, notes = fit_limits(
            self.config.limits, budget, slots, disk_in_memory=os.geteuid() == 0
        )
        return notes

    def _prepare(self) -> _Ready:
        root = self.config.root_dir
        prepare_root(root, traversable=False)
        agent = agent_binary(os.path.join(root, BIN_DIR), self.config.executor_binary)
        mount_slots = workspaces_mountable(root, self.config.limits.disk_bytes)
        return _Ready(agent, mount_slots, os.geteuid() == 0)

    async def ensure_ready(self) -> _Ready:
        """Check once that a daemon answers; prepare the root and the executor."""
        async with self._lock:
            if self._ready is None:
                reason = await docker_available(self.config.docker)
                if reason is not None:
                    raise SandboxError(f"docker backend: {reason}")
                if self.config.run_as_root and os.geteuid() != 0:
                    raise ConfigError(
                        "DockerConfig.run_as_root needs hermes to run as root (the slot "
                        "directories must belong to the container's root)"
                    )
                self._ready = await anyio.to_thread.run_sync(self._prepare)
            return self._ready

    async def _limits_writable_layer(self, image: str) -> bool:
        """Whether ``--storage-opt size`` works here (probed once; a warning when not)."""
        async with self._lock:
            if self._storage_opt is None:
                config = self.config
                found = await storage_opt_supported(config.docker, image, config.cli_timeout_s)
                if not found and config.limits.disk_bytes is not None:
                    logger.warning(
                        "hermes-sandbox: this docker storage driver cannot limit a container's "
                        "writable layer (--storage-opt size): a slot on a writable image (an "
                        "item's own, or read_only_rootfs=False) can fill the host disk outside "
                        "its workspace and /tmp"
                    )
                self._storage_opt = found
            return self._storage_opt

    def _settings(self, ready: _Ready, runtime: _DockerRuntime, **fields: Any) -> AgentHostSettings:
        config = self.config
        settings = AgentHostSettings(
            runtime=runtime,
            root_dir=config.root_dir,
            workspace=runtime.workspace,
            limits=self.limits,
            env=config.env,
            uid_range=config.uid_range,
            slot_user=(0, 0) if config.run_as_root else None,
            as_root=ready.as_root,
            mount_slots=ready.mount_slots,
            restore_in_place=config.restores_in_place,
            max_output_bytes=config.max_output_bytes,
            max_read_bytes=config.max_read_bytes,
            start_timeout_s=config.start_timeout_s,
        )
        return attrs.evolve(settings, **fields)

    async def start_host(self, spec: HostSpec) -> Host:
        ready = await self.ensure_ready()
        config = self.config
        image = await self._images.named(config.image)
        writable = not config.read_only_rootfs
        runtime = _DockerRuntime(
            backend=self,
            agent=ready.agent,
            storage_opt=writable and await self._limits_writable_layer(image),
            image=image,
            workspace=config.workspace,
            read_only=not writable,
        )
        return await AgentHost.create(spec, self._settings(ready, runtime))

    async def start_image_host(self, spec: HostSpec, image: SlotImage) -> Host:
        """A host of one slot running ``image`` as its own user, its workspace at
        ``image.workdir`` (with the image's files there) or the backend's workspace path; the
        pool removes it on release. Raises ``ImageUnavailable`` naming the image."""
        if spec.slots != 1:
            raise ConfigError("a host running an item's own image has one slot")
        ready = await self.ensure_ready()
        ref = await self._images.resolve(image)
        user = await self._image_user(ref)
        if not ready.as_root and user != (os.geteuid(), os.getegid()):
            raise ConfigError(
                f"image {ref} runs as uid {user[0]}: running it needs hermes to run as root "
                "(its workspace must belong to that user)"
            )
        runtime = _DockerRuntime(
            backend=self,
            agent=ready.agent,
            storage_opt=await self._limits_writable_layer(ref),
            image=ref,
            workspace=image.workdir or self.config.workspace,
            read_only=False,
            copy_workdir=image.workdir is not None,
        )
        settings = self._settings(ready, runtime, slot_user=user, restore_in_place=False)
        return await AgentHost.create(spec, settings)

    async def _image_user(self, image: str) -> tuple[int, int]:
        if image not in self._users:
            async with ImageFiles(self.config.docker, image) as files:
                self._users[image] = await files.user()
        return self._users[image]

    async def sweep_orphans(self, pool_name: str) -> int:
        """Remove containers and directories of dead pools under this backend's root (any name;
        never a live pool's). ``hermes-sandbox cleanup`` removes those of every root."""
        await self.ensure_ready()
        containers = await remove_dead_containers(
            self.config.docker, root_dir=self.config.root_label
        )
        removed = await anyio.to_thread.run_sync(sweep_directories, [self.config.root_dir])
        return max(hosts_removed(removed), len({r.what for r in containers}))
