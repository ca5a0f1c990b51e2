"""The ``ray`` backend: sandbox hosts are Ray actors placed on the nodes of a Ray cluster.

Each host is one :class:`~hermes_sandbox.backends.ray_actor.SandboxHostActor` (``cpus`` and
``memory_mb`` reserved per host, the ``SPREAD`` scheduling strategy placing hosts across
nodes) holding a bwrap host on its node; the driver's :class:`RayHost` and :class:`RaySlot`
call its methods and await the results (Ray object refs are awaitable) under a timeout each.
Files move through the actor in chunks of at most 1 MiB; no filesystem is shared.

Lifetime: the actors are *owned*, never detached: Ray kills them when the driver process that
created them exits, however it exits, and their bwrap sandboxes die with them (bwrap's
die-with-parent). ``RayHost.close`` stops the host and kills the actor. A node lost mid-run
turns every call on its hosts into a ``SandboxError`` (an infrastructure failure, retried by
the rollout runner) and fails the hosts' health checks, so the pool replaces them elsewhere.
The next actor started on a node removes what killed actors left there (directories, mounts,
cgroups), as the bwrap backend does at a pool's start.

Ray is an optional dependency: ``pip install 'hermes-sandbox[ray]'``; every node needs
hermes-sandbox (and Ray) installed in the Python its Ray workers run.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, ExecResult, SandboxError, SandboxTimeout, Slot

from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.bwrap import BwrapConfig
from hermes_sandbox.backends.ray_actor import CHUNK_BYTES, ActorFailure, SandboxHostActor
from hermes_sandbox.file_window import TextWindow
from hermes_sandbox.server import wire

try:
    import ray
    from ray.exceptions import RayActorError, RayError, RayTaskError
except ImportError as exc:  # pragma: no cover - the factory names the extra
    raise ImportError(f"{exc}; install hermes-sandbox[ray]") from exc

__all__ = ["RayBackend", "RayConfig", "RayHost", "RaySlot", "RayTimeouts"]


@attrs.frozen(slots=True, kw_only=True)
class RayTimeouts:
    """Seconds. ``start`` covers placing the actor (waiting for free resources) and starting
    its host; an exec waits ``exec_margin`` longer than the command's own timeout."""

    connect: float = 60.0
    start: float = 180.0
    request: float = 60.0
    exec_margin: float = 30.0
    health: float = 10.0


def _resources(value: Mapping[str, float]) -> dict[str, float]:
    return {str(k): float(v) for k, v in value.items()}


@attrs.frozen(slots=True, kw_only=True)
class RayConfig:
    """Where the cluster is and what each host reserves on it.

    ``address``: the cluster (``host:port`` of its head, or ``auto`` for the cluster this
    machine belongs to). ``cpus``/``memory_mb``: Ray resources reserved per host (``memory_mb``
    ``None`` reserves none); ``resources``: custom Ray resources too, e.g. to keep hosts on the
    nodes started with ``--resources '{"sandbox": 64}'``. ``python``: the Python executable on
    the nodes the host actors run on (a virtual environment with hermes-sandbox); ``None`` =
    the job's: Ray's default, or, when the driver runs under ``uv run``, ``uv run`` again on
    every worker (Ray's uv integration), so set it then. ``bwrap``: the node-local bwrap
    settings of every host (its ``root_dir`` is a path on the nodes).
    """

    address: str
    cpus: float = 1.0
    memory_mb: int | None = None
    resources: dict[str, float] = attrs.field(factory=dict, converter=_resources)
    python: str | None = None
    bwrap: BwrapConfig = attrs.field(factory=BwrapConfig)
    timeouts: RayTimeouts = attrs.field(factory=RayTimeouts)

    def __attrs_post_init__(self) -> None:
        if not self.address:
            raise ConfigError("RayConfig.address needs the Ray cluster address (host:port)")
        if not self.cpus > 0:
            raise ConfigError(f"RayConfig.cpus must be positive, got {self.cpus}")


class _Actor:
    """Calls into one host actor: every wait under a timeout, failures as sandbox errors."""

    def __init__(self, handle: Any, host_id: str, timeouts: RayTimeouts) -> None:
        self.handle = handle
        self.host_id = host_id
        self.timeouts = timeouts

    async def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        limit = self.timeouts.request if timeout is None else timeout
        async with self._errors(method, limit):
            with anyio.fail_after(limit):
                return await getattr(self.handle, method).remote(*args)

    @contextlib.asynccontextmanager
    async def _errors(self, method: str, limit: float) -> AsyncIterator[None]:
        try:
            yield
        except TimeoutError as exc:
            raise SandboxTimeout(
                f"{method} on Ray host {self.host_id} did not answer within {limit:.0f}s"
            ) from exc
        except RayTaskError as exc:
            cause = exc.cause
            if not isinstance(cause, ActorFailure):
                raise
            raise wire.error_from_wire(
                500, {"error": cause.kind, "message": cause.message}, f"Ray host {self.host_id}"
            ) from None
        except RayActorError as exc:
            raise SandboxError(
                f"Ray host {self.host_id} is gone (its actor or node died) during {method}: "
                f"{' '.join(str(exc).split())[:300]}"
            ) from exc
        except RayError as exc:
            raise SandboxError(f"{method} on Ray host {self.host_id} failed: {exc}") from exc


class RaySlot:
    """One slot of a Ray host (``Slot``, ``FileTransfer`` and the windowed reads) on the
    cluster node ``node_id``."""

    def __init__(self, actor: _Actor, index: int, workspace: str, node_id: str) -> None:
        self.node_id = node_id
        self._actor = actor
        self._index = index
        self._workspace = workspace
        self._slot_id = f"{actor.host_id}/{index}"

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return self._workspace

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
        args = (self._index, command, timeout, cwd, None if env is None else dict(env), stdin)
        result: ExecResult = await self._actor.call(
            "exec", *args, timeout=timeout + self._actor.timeouts.exec_margin
        )
        return result

    async def read_file(self, path: str) -> bytes:
        data: bytes = await self._actor.call("read_file", self._index, path)
        return data

    async def write_file(self, path: str, data: bytes) -> None:
        await self._actor.call("write_file", self._index, path, bytes(data))

    async def read_capped(self, path: str, max_bytes: int) -> bytes:
        data: bytes = await self._actor.call("read_capped", self._index, path, max_bytes)
        return data

    async def read_window(
        self, path: str, first: int, max_lines: int, max_line_bytes: int
    ) -> TextWindow:
        window: TextWindow = await self._actor.call(
            "read_window", self._index, path, first, max_lines, max_line_bytes
        )
        return window

    async def upload(self, local_path: str, remote_path: str) -> None:
        """Send ``local_path`` to the node 1 MiB at a time, then into the workspace."""
        transfer = uuid.uuid4().hex
        try:
            async with await anyio.open_file(local_path, "rb") as f:
                while chunk := await f.read(CHUNK_BYTES):
                    await self._actor.call("upload_chunk", transfer, chunk)
            await self._actor.call("upload_chunk", transfer, b"")  # an empty file too
            await self._actor.call("upload_finish", transfer, self._index, remote_path)
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
                await self._actor.call("transfer_done", transfer)
            raise

    async def download(self, remote_path: str, local_path: str) -> None:
        """Fetch the workspace's ``remote_path`` from the node 1 MiB at a time."""
        transfer, size = await self._actor.call("download_start", self._index, remote_path)
        try:
            async with await anyio.open_file(local_path, "wb") as f:
                offset = 0
                while offset < size:
                    chunk: bytes = await self._actor.call("download_chunk", transfer, offset)
                    if not chunk:
                        raise SandboxError(f"{remote_path!r} shrank while being downloaded")
                    await f.write(chunk)
                    offset += len(chunk)
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(FileNotFoundError):
                await anyio.Path(local_path).unlink()
            raise
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
                await self._actor.call("transfer_done", transfer)


class RayHost:
    """A host whose slots live in one actor on one node (``node_id``)."""

    def __init__(self, actor: _Actor, node_id: str, workspaces: list[str]) -> None:
        self._actor = actor
        self.node_id = node_id
        self._slots = [RaySlot(actor, i, w, node_id) for i, w in enumerate(workspaces)]
        self._closed = False

    @property
    def host_id(self) -> str:
        return self._actor.host_id

    def slot(self, index: int) -> Slot:
        return self._slots[index]

    async def reset_slot(self, index: int) -> None:
        if not 0 <= index < len(self._slots):
            raise IndexError(f"host {self.host_id} has no slot {index}")
        await self._actor.call("reset_slot", index)

    async def healthy(self) -> bool:
        if self._closed:
            return False
        try:
            ok: bool = await self._actor.call("healthy", timeout=self._actor.timeouts.health)
        except SandboxError:
            return False
        return ok

    async def close(self) -> None:
        """Stop the host on its node (a dead node has nothing left to stop), kill the actor."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                await self._actor.call("close")
            except SandboxError:
                pass
            finally:
                ray.kill(self._actor.handle, no_restart=True)


class RayBackend:
    """Starts one host actor per host on the Ray cluster at ``config.address`` (connecting
    this process to it on first use: one Ray cluster per process)."""

    def __init__(self, config: RayConfig) -> None:
        self.config = config
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return "ray"

    async def connect(self) -> None:
        """Join the cluster as a driver unless this process already has."""
        async with self._lock:
            if ray.is_initialized():
                return
            try:
                with anyio.fail_after(self.config.timeouts.connect):
                    await anyio.to_thread.run_sync(self._init, abandon_on_cancel=True)
            except TimeoutError as exc:
                raise SandboxError(
                    f"could not reach the Ray cluster at {self.config.address} within "
                    f"{self.config.timeouts.connect:.0f}s"
                ) from exc

    def _init(self) -> None:
        try:
            ray.init(
                address=self.config.address, log_to_driver=False, logging_level=logging.WARNING
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SandboxError(
                f"could not connect to the Ray cluster at {self.config.address}: {exc}"
            ) from exc

    def _options(self, spec: HostSpec) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_cpus": self.config.cpus,
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
            "max_concurrency": 1000,
        }
        if self.config.resources:
            options["resources"] = dict(self.config.resources)
        if self.config.python is not None:
            options["runtime_env"] = {"py_executable": self.config.python}
        if self.config.memory_mb is not None:
            options["memory"] = self.config.memory_mb * (1 << 20)
        return options

    async def start_host(self, spec: HostSpec) -> Host:
        await self.connect()
        remote_class: Any = ray.remote(SandboxHostActor)
        handle = remote_class.options(**self._options(spec)).remote(self.config.bwrap)
        actor = _Actor(handle, spec.host_id, self.config.timeouts)
        try:
            node_id, workspaces = await actor.call(
                "start", spec, timeout=self.config.timeouts.start
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(SandboxError), anyio.move_on_after(10):
                    await actor.call("close")
                ray.kill(handle, no_restart=True)
            raise
        return RayHost(actor, str(node_id), list(workspaces))

    async def sweep_orphans(self, pool_name: str) -> int:
        """Nothing to do from the driver: a killed driver's actors died with it (owned
        actors), and each new actor sweeps its node's leftovers before its host starts."""
        await self.connect()
        return 0
