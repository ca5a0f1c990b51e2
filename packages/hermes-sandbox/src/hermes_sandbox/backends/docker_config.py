"""Settings of the ``docker`` backend and the ``docker run`` command line of a slot container.

Every slot is its own container: a non-root user (``uid``) with no capabilities and
``no-new-privileges``, a read-only image, writable only in its workspace (a host directory
bind-mounted at ``workspace``, a tmpfs of ``disk_mb`` where hermes may mount) and in ``/tmp`` and
``/var/tmp`` (tmpfs of ``disk_mb`` inside the container), no network, and memory, CPU and pid
limits. Labels name its pool, its host and the process that owns it.
"""

from __future__ import annotations

import posixpath

import attrs
from hermes_protocols import ConfigError

from hermes_sandbox.backends._root_dir import default_root_dir
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.file_window import DEFAULT_MAX_READ_BYTES

POOL_LABEL = "org.hermes-rl.pool"
HOST_LABEL = "org.hermes-rl.host"
OWNER_LABEL = "org.hermes-rl.owner"
"""``<pid>:<start time>`` of the pool process that owns the container (see the orphan sweep)."""

NONROOT_UID = 65_532
"""The default user of slot containers (distroless' ``nonroot``); no host account needs it."""


@attrs.frozen(slots=True, kw_only=True)
class DockerConfig:
    """Image, user, limits and CLI settings of the docker backend (the image needs bash).

    ``run_as_root``: commands run as uid 0 of the container (still without capabilities), for
    images whose tasks expect root; with ``read_only_rootfs=False`` they may also change the
    image's files (e.g. ``/app``), which a reset discards with the container. ``disk_mb`` limits
    the workspace and ``/tmp``/``/var/tmp``; a writable image layer is limited only where the
    storage driver supports ``--storage-opt size`` (checked at start, a warning otherwise).
    ``lease_s``: a container that hears nothing from its pool for this long (the pool's health
    checks renew it) ends by itself, as it does at once when the pool process dies.
    ``root_dir``: where the host side of the workspaces lives (per user by default).

    A reset leaves nothing of the last trajectory. A non-root slot on a read-only image can
    write only to its tmpfs mounts and workspace, so the reset *restores* it in place (every
    process but the container's PID 1 killed, the tmpfs mounts, System V IPC and the workspace
    emptied); ``fresh_container_on_reset`` (implied by ``run_as_root`` or a writable image)
    replaces the container by a fresh one of the image instead (slower: see docs/sandbox.md).
    """

    image: str = "python:3.12-slim"
    allow_network: bool = False
    memory_mb: int | None = 2048
    cpus: float | None = 1.0
    pids_limit: int | None = 512
    disk_mb: int | None = 1024
    run_as_root: bool = False
    read_only_rootfs: bool = True
    fresh_container_on_reset: bool = False
    uid: int = NONROOT_UID
    workspace: str = "/workspace"
    root_dir: str = attrs.field(factory=lambda: default_root_dir("docker"))
    env: SlotEnv = attrs.field(factory=SlotEnv)
    lease_s: float = 300.0
    docker: str = "docker"
    extra_run_args: tuple[str, ...] = ()
    max_output_bytes: int = 1 << 20
    cli_timeout_s: float = 300.0
    start_timeout_s: float = 120.0
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES

    def __attrs_post_init__(self) -> None:
        if not posixpath.isabs(self.workspace) or posixpath.normpath(self.workspace) == "/":
            raise ConfigError("DockerConfig.workspace must be an absolute path below /")
        if self.uid <= 0 and not self.run_as_root:
            raise ConfigError("DockerConfig.uid must be positive; set run_as_root=True for root")
        if self.disk_mb is not None and self.disk_mb < 1:
            raise ConfigError("DockerConfig.disk_mb must be at least 1 (or None: not limited)")
        if self.lease_s <= 0:
            raise ConfigError("DockerConfig.lease_s must be positive")

    @property
    def recreate_on_reset(self) -> bool:
        """Whether a reset replaces the container (else it restores it in place)."""
        return self.fresh_container_on_reset or self.run_as_root or not self.read_only_rootfs


def _tmpfs(path: str, disk_mb: int | None) -> list[str]:
    size = f",size={disk_mb}m" if disk_mb is not None else ""
    return ["--tmpfs", f"{path}:rw,exec,nosuid,nodev,mode=1777{size}"]


def run_argv(
    config: DockerConfig,
    *,
    name: str,
    labels: dict[str, str],
    user: tuple[int, int],
    workspace_dir: str,
    storage_opt: bool,
    main: list[str],
) -> list[str]:
    """``docker run`` of one slot container whose main process is ``main`` (its stdin attached:
    the container ends when the pool closes it or dies)."""
    argv = [config.docker, "run", "-i", "--rm", "--name", name, "--user", "{}:{}".format(*user)]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    if not config.allow_network:
        argv += ["--network", "none"]
    if config.memory_mb is not None:
        argv += ["--memory", f"{config.memory_mb}m", "--memory-swap", f"{config.memory_mb}m"]
    if config.cpus is not None:
        argv += ["--cpus", str(config.cpus)]
    if config.pids_limit is not None:
        argv += ["--pids-limit", str(config.pids_limit)]
    argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    if config.read_only_rootfs:
        argv.append("--read-only")
    elif storage_opt and config.disk_mb is not None:
        argv += ["--storage-opt", f"size={config.disk_mb}m"]
    argv += _tmpfs("/tmp", config.disk_mb) + _tmpfs("/var/tmp", config.disk_mb)
    argv += ["--mount", f"type=bind,source={workspace_dir},target={config.workspace}"]
    argv += ["--workdir", config.workspace, *config.extra_run_args, config.image, *main]
    return argv
