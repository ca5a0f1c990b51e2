"""Settings of the ``docker`` backend and the ``docker run`` command line of a slot container.

Every slot is its own container: an unprivileged uid (one per slot) with no capabilities and
``no-new-privileges``, a read-only image, writable only in what the slot's host directory binds
(workspace, ``/tmp``, ``/var/tmp``, ``/dev/shm``: one size limit), no network, memory, CPU and
pid limits, and ``hermes-exec`` as PID 1 (see :mod:`~hermes_sandbox.backends.agent_host`).
Labels name its pool, its host, the user and the process that owns it.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping

import attrs
from hermes_protocols import ConfigError

from hermes_sandbox.backends._host_dirs import SLOT_UID_RANGE
from hermes_sandbox.backends._root_dir import default_root_dir
from hermes_sandbox.backends.agent_host import AGENT_PATH, CONTROL_DIR, CONTROL_SOCKET, SlotPaths
from hermes_sandbox.backends.docker_images import alias_pairs
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.file_window import DEFAULT_MAX_READ_BYTES
from hermes_sandbox.limits import ResourceLimits

POOL_LABEL = "org.hermes-rl.pool"
HOST_LABEL = "org.hermes-rl.host"
USER_LABEL = "org.hermes-rl.user"
"""The uid of the process that started the container (cleanup only looks at its own)."""
OWNER_LABEL = "org.hermes-rl.owner"
"""``<pid>:<start time>`` of the pool process that owns the container (see the orphan sweep)."""
ROOT_LABEL = "org.hermes-rl.root"
"""The backend's ``root_dir``: a pool's start sweeps only its own root, as on bwrap."""


@attrs.frozen(slots=True, kw_only=True)
class DockerConfig:
    """Image, user, limits and CLI settings of the docker backend (the image needs bash).

    ``limits``: ``slot_memory_bytes``, ``slot_cpus`` and ``slot_processes`` become the
    container's ``--memory``, ``--cpus`` and ``--pids-limit``, ``disk_bytes`` the size of the
    slot's directory (a tmpfs where hermes runs as root), the rest rlimits of every command.
    ``run_as_root``: commands run as uid 0 of the container (still without capabilities), for
    images whose tasks expect root; with ``read_only_rootfs=False`` they may also change the
    image's files (e.g. a task's ``/app``). A writable image layer is size-limited only where
    the storage driver supports ``--storage-opt size`` (checked at start, a warning otherwise).
    ``uid_range``: host uids slots run as (each slot its own, as bwrap's), when hermes runs as
    root; otherwise slots run as hermes' own uid. ``executor_binary``: a prebuilt
    ``hermes-exec`` instead of building it with the machine's C compiler.

    A reset leaves nothing of the last trajectory: a non-root slot on a read-only image is
    restored in place (see :mod:`~hermes_sandbox.backends.agent_host`); with ``run_as_root``, a
    writable image, or ``fresh_container_on_reset``, the container is replaced by a fresh one
    of the image (slower: see docs/sandbox.md).

    ``image_aliases`` map image names (``image``, an item's image, a built Dockerfile's
    ``FROM``) to local images, for a host that cannot pull; ``alias_option`` is how the user
    sets them (named in errors). An item's own image (``SandboxPool.acquire_image``) runs as
    its own user (its ``USER``, root when it names none) on a writable image layer, with the
    files of its workdir copied into the slot's workspace.
    """

    image: str = "python:3.12-slim"
    allow_network: bool = False
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    run_as_root: bool = False
    read_only_rootfs: bool = True
    fresh_container_on_reset: bool = False
    uid_range: tuple[int, int] = SLOT_UID_RANGE
    workspace: str = "/workspace"
    root_dir: str = attrs.field(factory=lambda: default_root_dir("docker"))
    env: SlotEnv = attrs.field(factory=SlotEnv)
    executor_binary: str | None = None
    docker: str = "docker"
    extra_run_args: tuple[str, ...] = ()
    max_output_bytes: int = 1 << 20
    cli_timeout_s: float = 300.0
    start_timeout_s: float = 120.0
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    image_aliases: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=alias_pairs)
    alias_option: str = "DockerConfig.image_aliases"
    pull_timeout_s: float = 600.0

    def __attrs_post_init__(self) -> None:
        if not posixpath.isabs(self.workspace) or posixpath.normpath(self.workspace) in (
            "/",
            "/tmp",
            "/var/tmp",
            "/dev/shm",
        ):
            raise ConfigError("DockerConfig.workspace must be an absolute path of its own")
        if any(c in self.root_dir for c in ",:"):
            raise ConfigError(f"DockerConfig.root_dir {self.root_dir!r} may not hold ',' or ':'")

    @property
    def root_label(self) -> str:
        """The value of :data:`ROOT_LABEL` on this backend's containers."""
        return os.path.abspath(self.root_dir)

    @property
    def restores_in_place(self) -> bool:
        """Whether a reset restores the container (else it replaces it)."""
        return not (self.fresh_container_on_reset or self.run_as_root or not self.read_only_rootfs)


def _bind(source: str, target: str, *, readonly: bool = False) -> list[str]:
    return [
        "--mount",
        f"type=bind,source={source},target={target}{',readonly' if readonly else ''}",
    ]


def run_argv(
    config: DockerConfig,
    *,
    image: str,
    workspace: str,
    read_only: bool,
    name: str,
    labels: Mapping[str, str],
    user: tuple[int, int],
    paths: SlotPaths,
    agent: str,
    limits: ResourceLimits,
    storage_opt: bool,
) -> list[str]:
    """``docker run`` of one slot container (detached, removed when its agent exits)."""
    argv = [config.docker, "run", "-d", "--rm", "--name", name, "--user", "{}:{}".format(*user)]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    if not config.allow_network:
        argv += ["--network", "none"]
    if limits.slot_memory_bytes is not None:
        memory = str(limits.slot_memory_bytes)
        argv += ["--memory", memory, "--memory-swap", memory]
    if limits.slot_cpus is not None:
        argv += ["--cpus", f"{limits.slot_cpus:g}"]
    if limits.slot_processes is not None:
        argv += ["--pids-limit", str(limits.slot_processes)]
    argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--log-driver", "none"]
    if read_only:
        argv.append("--read-only")
    elif storage_opt and limits.disk_bytes is not None:
        argv += ["--storage-opt", f"size={limits.disk_bytes}"]
    argv += _bind(paths.workspace, workspace)
    argv += _bind(paths.tmp, "/tmp") + _bind(paths.tmp, "/var/tmp") + _bind(paths.shm, "/dev/shm")
    argv += _bind(paths.control_dir, CONTROL_DIR, readonly=True)
    argv += _bind(agent, AGENT_PATH, readonly=True)
    argv += ["--workdir", workspace, "--entrypoint", AGENT_PATH, *config.extra_run_args]
    return [*argv, image, "--connect", CONTROL_SOCKET]
