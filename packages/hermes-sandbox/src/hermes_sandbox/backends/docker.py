"""The ``docker`` backend: one container per host (Docker CLI), one workspace directory per slot.

Containers run ``sleep infinity`` under ``--init`` with the network off (``--network none``)
unless ``allow_network``, pids/memory/cpu limits, and labels naming their pool so a later run
removes what a killed run left (``docker ps --filter label=...``). Commands run through
``docker exec`` under the shared container exec wrapper (GNU ``timeout``, exit 124, and
nothing the command started outlives it); files move with ``docker exec``/``docker cp``,
never through a size-limited stdout. A host may also run an item's own image
(:meth:`DockerBackend.start_image_host`: one slot, its workspace where the image says, e.g. a
task's ``/app``); images are found, pulled or built by :mod:`.docker_images`.
"""

from __future__ import annotations

import posixpath
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence

import anyio
import attrs
from hermes_protocols import (
    ConfigError,
    ExecResult,
    SandboxError,
    Slot,
    SlotImage,
    WorkspaceEscape,
)

from hermes_sandbox._output import CappedOutput
from hermes_sandbox.backends._container_exec import (
    TIMEOUT_EXIT,
    exec_argv,
    reset_script,
    resolve_in_workspace,
)
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.docker_images import DockerImages, alias_pairs
from hermes_sandbox.file_window import DEFAULT_MAX_READ_BYTES, FileTooLarge

POOL_LABEL = "org.hermes-rl.pool"
HOST_LABEL = "org.hermes-rl.host"
_GRACE_S = 15.0


@attrs.frozen(slots=True, kw_only=True)
class DockerConfig:
    """Image, limits and CLI settings of the docker backend (the image needs bash+coreutils).

    A reset empties the slot's workspace; state elsewhere in the container (a task image's
    ``/app``) persists unless ``fresh_container_on_reset`` (one slot per host) replaces the
    container by a fresh one of the image at every reset. ``max_read_bytes`` caps
    ``read_file``. ``image_aliases`` map image names (``image``, an item's image, a built
    Dockerfile's ``FROM``) to local images, for a host that cannot pull; ``alias_option`` is
    how the user sets them (named in errors).
    """

    image: str = "python:3.12-slim"
    allow_network: bool = False
    memory_mb: int | None = 2048
    cpus: float | None = 1.0
    pids_limit: int | None = 512
    workspace_root: str = "/workspace"
    docker: str = "docker"
    extra_run_args: tuple[str, ...] = ()
    max_output_bytes: int = 1 << 20
    cli_timeout_s: float = 300.0
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    fresh_container_on_reset: bool = False
    image_aliases: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=alias_pairs)
    alias_option: str = "DockerConfig.image_aliases"
    pull_timeout_s: float = 600.0

    def __attrs_post_init__(self) -> None:
        if not posixpath.isabs(self.workspace_root):
            raise ConfigError("DockerConfig.workspace_root must be an absolute path")


def run_argv(config: DockerConfig, spec: HostSpec) -> list[str]:
    """The ``docker run`` command line that starts a host container."""
    argv = [config.docker, "run", "-d", "--init", "--name", spec.host_id]
    argv += ["--label", f"{POOL_LABEL}={spec.pool_name}", "--label", f"{HOST_LABEL}={spec.host_id}"]
    if not config.allow_network:
        argv += ["--network", "none"]
    if config.memory_mb is not None:
        argv += ["--memory", f"{config.memory_mb}m", "--memory-swap", f"{config.memory_mb}m"]
    if config.cpus is not None:
        argv += ["--cpus", str(config.cpus)]
    if config.pids_limit is not None:
        argv += ["--pids-limit", str(config.pids_limit)]
    argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    argv += [*config.extra_run_args, config.image, "sleep", "infinity"]
    return argv


async def docker_available(docker: str = "docker") -> str | None:
    """``None`` when a Docker daemon answers, else the reason it does not."""
    try:
        with anyio.fail_after(20):
            done = await anyio.run_process(
                [docker, "info", "--format", "{{.ServerVersion}}"], check=False
            )
    except (OSError, TimeoutError) as exc:
        return f"docker CLI unusable: {exc}"
    if done.returncode != 0:
        return f"no Docker daemon reachable: {done.stderr.decode(errors='replace').strip()[:200]}"
    return None


async def _cli(
    config: DockerConfig,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        with anyio.fail_after(timeout or config.cli_timeout_s):
            return await anyio.run_process([config.docker, *args], input=stdin, check=False)
    except TimeoutError as exc:
        raise SandboxError(f"`docker {args[0]}` did not finish in time") from exc
    except OSError as exc:
        raise SandboxError(f"cannot run the docker CLI ({config.docker!r}): {exc}") from exc


def _file_error(stderr: bytes, path: str) -> Exception:
    text = stderr.decode(errors="replace").strip()
    if "ESCAPE" in text:
        return WorkspaceEscape(f"{path!r} resolves outside the workspace")
    if text.startswith("TOO-LARGE "):
        size, cap = (int(x) for x in text.split()[1:3])
        return FileTooLarge(path, size, cap)
    if "No such file" in text or "Could not find" in text:
        return FileNotFoundError(f"no such file: {path}")
    if "Is a directory" in text:
        return IsADirectoryError(f"is a directory: {path}")
    if "Permission denied" in text:
        return PermissionError(f"permission denied: {path}")
    return SandboxError(f"file operation on {path!r} failed: {text[:300]}")


class DockerSlot:
    """One workspace directory in a host container."""

    def __init__(self, host: DockerHost, index: int, workspace: str | None = None) -> None:
        self._host = host
        self._index = index
        self._workspace = workspace or posixpath.join(host.config.workspace_root, f"slot-{index}")

    @property
    def slot_id(self) -> str:
        return f"{self._host.host_id}/{self._index}"

    @property
    def workspace(self) -> str:
        return self._workspace

    def resolve(self, path: str, *, allow_root: bool = False) -> str:
        """``path`` inside the workspace, lexically; ``..`` or outside absolute paths fail."""
        return resolve_in_workspace(self._workspace, path, allow_root=allow_root)

    def _workdir(self, cwd: str | None) -> str:
        """Relative ``cwd`` stays in the workspace; an absolute one may be anywhere in the
        container, which is the sandbox (as in bwrap): e.g. a task image's ``/app``."""
        if cwd is None:
            return self._workspace
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return self.resolve(cwd, allow_root=True)

    def _guard(self, full: str) -> str:
        """Shell that fails with ESCAPE when ``full`` resolves (symlinks) outside the workspace."""
        ws = shlex.quote(self._workspace)
        return (
            f'r=$(readlink -m -- {shlex.quote(full)}); case "$r" in {ws}/*) ;; '
            "*) echo ESCAPE >&2; exit 3;; esac; "
        )

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
        workdir = self._workdir(cwd)
        args = ["exec", "-i", "-w", workdir]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        args += [self._host.container, *exec_argv(self.slot_id, command, timeout)]
        started = time.monotonic()
        done = await _cli(self._host.config, args, stdin=stdin or b"", timeout=timeout + _GRACE_S)
        out = CappedOutput(self._host.config.max_output_bytes)
        err = CappedOutput(self._host.config.max_output_bytes)
        out.feed(done.stdout)
        err.feed(done.stderr)
        code = done.returncode if done.returncode >= 0 else 128 - done.returncode
        timed_out = code == TIMEOUT_EXIT
        return ExecResult(
            exit_code=code,
            stdout=out.render(),
            stderr=err.render(),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            duration_s=time.monotonic() - started,
        )

    async def read_file(self, path: str) -> bytes:
        full = self.resolve(path)
        cap = self._host.config.max_read_bytes
        script = self._guard(full) + (
            f's=$(stat -c %s -- "$r") && if [ "$s" -gt {cap} ]; then '
            f'echo "TOO-LARGE $s {cap}" >&2; exit 3; fi; exec head -c {cap} -- "$r"'
        )
        done = await _cli(self._host.config, ["exec", self._host.container, "bash", "-c", script])
        if done.returncode != 0:
            raise _file_error(done.stderr, path)
        return done.stdout

    async def write_file(self, path: str, data: bytes) -> None:
        full = self.resolve(path)
        script = self._guard(full) + 'mkdir -p -- "$(dirname -- "$r")" && exec cat > "$r"'
        args = ["exec", "-i", self._host.container, "bash", "-c", script]
        done = await _cli(self._host.config, args, stdin=bytes(data))
        if done.returncode != 0:
            raise _file_error(done.stderr, path)

    async def upload(self, local_path: str, remote_path: str) -> None:
        full = self.resolve(remote_path)
        check = self._guard(full) + 'mkdir -p -- "$(dirname -- "$r")"'
        done = await _cli(self._host.config, ["exec", self._host.container, "bash", "-c", check])
        if done.returncode != 0:
            raise _file_error(done.stderr, remote_path)
        done = await _cli(self._host.config, ["cp", local_path, f"{self._host.container}:{full}"])
        if done.returncode != 0:
            raise _file_error(done.stderr, remote_path)

    async def download(self, remote_path: str, local_path: str) -> None:
        full = self.resolve(remote_path)
        check = (
            self._guard(full)
            + 'test -f "$r" || { test -d "$r" && echo "Is a directory" >&2; exit 1; }'
        )
        done = await _cli(self._host.config, ["exec", self._host.container, "bash", "-c", check])
        if done.returncode != 0:
            raise _file_error(done.stderr or b"No such file", remote_path)
        done = await _cli(self._host.config, ["cp", f"{self._host.container}:{full}", local_path])
        if done.returncode != 0:
            raise _file_error(done.stderr, remote_path)


class DockerHost:
    """A running container with ``slots`` workspace directories (or one at ``workspace``)."""

    def __init__(
        self, spec: HostSpec, container: str, config: DockerConfig, workspace: str | None = None
    ) -> None:
        if workspace is not None and spec.slots != 1:
            raise ConfigError("a docker host with its own workspace directory has one slot")
        self._spec = spec
        self.container = container
        self.config = config
        self._slots = [DockerSlot(self, i, workspace) for i in range(spec.slots)]
        self._closed = False

    @property
    def host_id(self) -> str:
        return self._spec.host_id

    def slot(self, index: int) -> Slot:
        return self._slots[index]

    async def _sh(self, script: str) -> None:
        done = await _cli(self.config, ["exec", self.container, "bash", "-c", script])
        if done.returncode != 0:
            raise SandboxError(f"{self.host_id}: {done.stderr.decode(errors='replace')[:300]}")

    async def prepare(self) -> None:
        await self._sh("mkdir -p " + " ".join(shlex.quote(s.workspace) for s in self._slots))

    async def reset_slot(self, index: int) -> None:
        if self.config.fresh_container_on_reset:
            await self._recreate()
            return
        slot = self._slots[index]
        await self._sh(reset_script(slot.workspace, slot.slot_id))

    async def _recreate(self) -> None:
        """Replace the container by a fresh one of the image (state outside the workspace too,
        e.g. a task's ``/app``, starts over)."""
        with anyio.CancelScope(shield=True):
            await _cli(self.config, ["rm", "-f", self.container], timeout=120)
        done = await _cli(self.config, run_argv(self.config, self._spec)[1:])
        if done.returncode != 0:
            self._closed = True
            text = done.stderr.decode(errors="replace").strip()
            raise SandboxError(f"{self.host_id}: recreating the container failed: {text[:300]}")
        self.container = done.stdout.decode().strip()
        await self.prepare()

    async def healthy(self) -> bool:
        if self._closed:
            return False
        done = await _cli(
            self.config, ["inspect", "-f", "{{.State.Running}}", self.container], timeout=30
        )
        return done.returncode == 0 and done.stdout.strip() == b"true"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await _cli(self.config, ["rm", "-f", self.container], timeout=120)


class DockerBackend:
    """Starts one labelled container per host; sweeps containers labelled with a pool name."""

    def __init__(self, config: DockerConfig | None = None) -> None:
        self.config = config or DockerConfig()
        self._images = DockerImages(
            self.config.docker,
            dict(self.config.image_aliases),
            pull_timeout_s=self.config.pull_timeout_s,
            alias_option=self.config.alias_option,
        )

    @property
    def name(self) -> str:
        return "docker"

    async def start_host(self, spec: HostSpec) -> Host:
        if self.config.fresh_container_on_reset and spec.slots != 1:
            raise ConfigError("fresh_container_on_reset needs one slot per host (slots_per_host=1)")
        return await self._start(spec, SlotImage(name=self.config.image), None)

    async def start_image_host(self, spec: HostSpec, image: SlotImage) -> Host:
        """A host of one slot running ``image``, its workspace at ``image.workdir`` (the
        backend's per-slot directory when ``None``); the pool removes it on release."""
        if spec.slots != 1:
            raise ConfigError("a host running an item's own image has one slot")
        return await self._start(spec, image, image.workdir)

    async def _start(self, spec: HostSpec, image: SlotImage, workspace: str | None) -> Host:
        reason = await docker_available(self.config.docker)
        if reason is not None:
            raise SandboxError(f"docker backend: {reason}")
        config = attrs.evolve(self.config, image=await self._images.resolve(image))
        host: DockerHost | None = None
        try:
            done = await _cli(config, run_argv(config, spec)[1:])
            if done.returncode != 0:
                text = done.stderr.decode(errors="replace").strip()
                raise SandboxError(f"docker run {config.image} failed: {text[:500]}")
            host = DockerHost(spec, done.stdout.decode().strip(), config, workspace)
            await host.prepare()
        except BaseException:
            with anyio.CancelScope(shield=True):
                if host is not None:
                    await host.close()
                else:  # the container may exist even if `docker run` was interrupted
                    await _cli(config, ["rm", "-f", spec.host_id], timeout=120)
            raise
        return host

    async def sweep_orphans(self, pool_name: str) -> int:
        if await docker_available(self.config.docker) is not None:
            return 0
        done = await _cli(self.config, ["ps", "-aq", "--filter", f"label={POOL_LABEL}={pool_name}"])
        ids = done.stdout.decode().split()
        if ids:
            await _cli(self.config, ["rm", "-f", *ids], timeout=300)
        return len(ids)
