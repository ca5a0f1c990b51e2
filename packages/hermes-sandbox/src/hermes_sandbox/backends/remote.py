"""The ``remote`` backend: hosts are running ``hermes-sandbox serve`` servers, reached by URL.

A host is one server; its slots are the server's slots. Files stream both ways without size
limit. Every request has a timeout (an exec's is its own timeout plus a margin); transport
failures raise :class:`~hermes_protocols.SandboxError` naming the server, timeouts
:class:`~hermes_protocols.SandboxTimeout`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs
import httpx
from hermes_protocols import ConfigError, ExecResult, SandboxError, SandboxTimeout, Slot

from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.server import wire

_CHUNK = 1 << 20


@attrs.frozen(slots=True, kw_only=True)
class RemoteTimeouts:
    """Seconds. An exec waits ``exec_margin`` longer than the command's own timeout."""

    connect: float = 10.0
    request: float = 60.0
    exec_margin: float = 30.0
    file: float = 600.0
    health: float = 10.0


@attrs.frozen(slots=True, kw_only=True)
class RemoteConfig:
    """The servers this backend may use (one host each) and their bearer token."""

    urls: tuple[str, ...] = attrs.field(converter=tuple)
    token: str
    timeouts: RemoteTimeouts = attrs.field(factory=RemoteTimeouts)

    def __attrs_post_init__(self) -> None:
        if not self.urls:
            raise ConfigError("RemoteConfig.urls needs at least one sandbox server URL")
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ConfigError(f"sandbox server URLs must start with http:// or https://: {bad}")


class ServerClient:
    """An HTTP client for one sandbox server (owns its connection pool)."""

    def __init__(self, url: str, token: str, timeouts: RemoteTimeouts) -> None:
        self.url = url.rstrip("/")
        self.timeouts = timeouts
        self._http = httpx.AsyncClient(
            base_url=self.url + wire.API_PREFIX,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeouts.request, connect=timeouts.connect),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._http.aclose()

    @contextlib.asynccontextmanager
    async def _errors(self, what: str) -> AsyncIterator[None]:
        try:
            yield
        except httpx.TimeoutException as exc:
            raise SandboxTimeout(f"{what} on {self.url} timed out ({exc!r})") from exc
        except httpx.TransportError as exc:
            raise SandboxError(
                f"sandbox server {self.url} unreachable during {what}: {exc!r}"
            ) from exc

    async def _check(self, response: httpx.Response, what: str) -> None:
        if response.is_success:
            return
        await response.aread()
        try:
            payload = response.json()
        except ValueError:
            payload = {"message": response.text[:500]}
        if not isinstance(payload, dict):
            payload = {"message": str(payload)[:500]}
        raise wire.error_from_wire(response.status_code, payload, f"{what} on {self.url}")

    async def health(self) -> dict[str, Any]:
        async with self._errors("health check"):
            response = await self._http.get("/health", timeout=self.timeouts.health)
        await self._check(response, "health check")
        data: dict[str, Any] = response.json()
        return data

    async def exec(self, index: int, body: dict[str, Any], timeout: float) -> ExecResult:
        async with self._errors("exec"):
            response = await self._http.post(
                f"/slots/{index}/exec", json=body, timeout=timeout + self.timeouts.exec_margin
            )
        await self._check(response, f"exec in slot {index}")
        return wire.result_from_wire(response.json())

    async def exec_batch(self, requests: Sequence[dict[str, Any]]) -> list[ExecResult | Exception]:
        """Run many execs (each with a ``slot`` key) concurrently on the server."""
        longest = max((float(r["timeout"]) for r in requests), default=0.0)
        async with self._errors("batched exec"):
            response = await self._http.post(
                "/exec_batch",
                json={"requests": list(requests)},
                timeout=longest + self.timeouts.exec_margin,
            )
        await self._check(response, "batched exec")
        out: list[ExecResult | Exception] = []
        for item in response.json()["results"]:
            if "error" in item:
                out.append(wire.error_from_wire(item.get("status", 500), item, "batched exec"))
            else:
                out.append(wire.result_from_wire(item))
        return out

    async def read_file(self, index: int, path: str) -> bytes:
        async with self._errors("read_file"):
            response = await self._http.get(
                f"/slots/{index}/file", params={"path": path}, timeout=self.timeouts.file
            )
        await self._check(response, f"read_file {path!r}")
        return response.content

    async def write_file(self, index: int, path: str, data: bytes) -> None:
        async with self._errors("write_file"):
            response = await self._http.put(
                f"/slots/{index}/file",
                params={"path": path},
                content=bytes(data),
                timeout=self.timeouts.file,
            )
        await self._check(response, f"write_file {path!r}")

    async def upload(self, index: int, local_path: str, path: str) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            async with await anyio.open_file(local_path, "rb") as f:
                while chunk := await f.read(_CHUNK):
                    yield chunk

        async with self._errors("upload"):
            response = await self._http.put(
                f"/slots/{index}/file",
                params={"path": path},
                content=chunks(),
                timeout=self.timeouts.file,
            )
        await self._check(response, f"upload to {path!r}")

    async def download(self, index: int, path: str, local_path: str) -> None:
        await self._stream_to(f"/slots/{index}/file", {"path": path}, local_path, path)

    async def _stream_to(
        self, url: str, params: Mapping[str, str] | None, local_path: str, what: str
    ) -> None:
        async with (
            self._errors(f"download of {what!r}"),
            self._http.stream("GET", url, params=params, timeout=self.timeouts.file) as response,
        ):
            await self._check(response, f"download of {what!r}")
            try:
                async with await anyio.open_file(local_path, "wb") as f:
                    async for chunk in response.aiter_bytes(_CHUNK):
                        await f.write(chunk)
            except BaseException:
                with anyio.CancelScope(shield=True), contextlib.suppress(FileNotFoundError):
                    await anyio.Path(local_path).unlink()
                raise

    async def reset(self, index: int) -> None:
        async with self._errors("reset"):
            response = await self._http.post(f"/slots/{index}/reset", timeout=self.timeouts.file)
        await self._check(response, f"reset of slot {index}")

    async def archive(self, index: int, name: str | None = None, path: str = ".") -> str:
        """Pack the slot's ``path`` into a tar.gz artifact on the server; returns its name."""
        body: dict[str, Any] = {"path": path}
        if name is not None:
            body["name"] = name
        async with self._errors("archive"):
            response = await self._http.post(
                f"/slots/{index}/archive", json=body, timeout=self.timeouts.file
            )
        await self._check(response, f"archive of slot {index}")
        return str(response.json()["name"])

    async def slots(self) -> list[dict[str, Any]]:
        """``[{"index", "slot_id", "workspace"}]`` of every slot of the server."""
        async with self._errors("list slots"):
            response = await self._http.get("/slots")
        await self._check(response, "list slots")
        items: list[dict[str, Any]] = response.json()["slots"]
        return items

    async def list_artifacts(self) -> list[dict[str, Any]]:
        async with self._errors("list artifacts"):
            response = await self._http.get("/artifacts")
        await self._check(response, "list artifacts")
        items: list[dict[str, Any]] = response.json()["artifacts"]
        return items

    async def download_artifact(self, name: str, local_path: str) -> None:
        await self._stream_to(f"/artifacts/{name}", None, local_path, name)

    async def delete_artifact(self, name: str) -> None:
        async with self._errors("delete artifact"):
            response = await self._http.delete(f"/artifacts/{name}")
        await self._check(response, f"delete artifact {name!r}")


class RemoteSlot:
    """One slot of a sandbox server (``Slot`` and ``FileTransfer``)."""

    def __init__(self, host_id: str, client: ServerClient, index: int, workspace: str) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._client = client
        self._index = index
        self._workspace = workspace

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
        body = wire.exec_request(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        return await self._client.exec(self._index, body, timeout)

    async def read_file(self, path: str) -> bytes:
        return await self._client.read_file(self._index, path)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._client.write_file(self._index, path, data)

    async def upload(self, local_path: str, remote_path: str) -> None:
        await self._client.upload(self._index, local_path, remote_path)

    async def download(self, remote_path: str, local_path: str) -> None:
        await self._client.download(self._index, remote_path, local_path)

    async def archive(self, name: str | None = None, path: str = ".") -> str:
        """Pack this workspace (or ``path`` in it) into an artifact on the server."""
        return await self._client.archive(self._index, name, path)


class RemoteHost:
    """The first ``slots`` slots of one sandbox server.

    ``close`` resets those slots and closes the connection (the server keeps running), then
    calls ``on_close`` (the Nomad backend uses it to give the allocation back).
    """

    def __init__(
        self,
        host_id: str,
        client: ServerClient,
        slots: int,
        *,
        workspaces: Sequence[str] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._host_id = host_id
        self.client = client
        spaces = list(workspaces) if workspaces is not None else ["/workspace"] * slots
        self._slots = [RemoteSlot(host_id, client, i, spaces[i]) for i in range(slots)]
        self._on_close = on_close
        self._closed = False

    @classmethod
    async def connect(
        cls,
        spec: HostSpec,
        url: str,
        token: str,
        timeouts: RemoteTimeouts,
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> RemoteHost:
        """Check the server is up with enough slots; raise SandboxError otherwise."""
        client = ServerClient(url, token, timeouts)
        try:
            info = await client.health()
            if int(info.get("slots", 0)) < spec.slots:
                raise SandboxError(
                    f"sandbox server {url} has {info.get('slots')} slots, the pool wants "
                    f"{spec.slots} per host; lower slots_per_host or start it with more --slots"
                )
            # Authenticated: a wrong token fails here, not at the first exec.
            workspaces = [str(s["workspace"]) for s in await client.slots()]
        except BaseException:
            await client.aclose()
            raise
        return cls(spec.host_id, client, spec.slots, workspaces=workspaces, on_close=on_close)

    @property
    def host_id(self) -> str:
        return self._host_id

    @property
    def url(self) -> str:
        return self.client.url

    def slot(self, index: int) -> Slot:
        return self._slots[index]

    async def exec_batch(self, requests: Sequence[dict[str, Any]]) -> list[ExecResult | Exception]:
        return await self.client.exec_batch(requests)

    async def reset_slot(self, index: int) -> None:
        if not 0 <= index < len(self._slots):
            raise IndexError(f"host {self.host_id} has no slot {index}")
        await self.client.reset(index)

    async def healthy(self) -> bool:
        if self._closed:
            return False
        try:
            info = await self.client.health()
        except (SandboxError, ValueError):
            return False
        return info.get("status") == "ok"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                with anyio.move_on_after(self.client.timeouts.request):
                    for index in range(len(self._slots)):
                        await self.client.reset(index)
            except SandboxError:
                pass  # a dead server has nothing left to clean
            finally:
                await self.client.aclose()
                if self._on_close is not None:
                    await self._on_close()


class RemoteBackend:
    """Hands out the configured servers as hosts, one host per server."""

    def __init__(self, config: RemoteConfig) -> None:
        self.config = config
        self._in_use: set[str] = set()
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return "remote"

    async def start_host(self, spec: HostSpec) -> Host:
        async with self._lock:
            free = [u for u in self.config.urls if u not in self._in_use]
            if not free:
                raise SandboxError(
                    f"all {len(self.config.urls)} sandbox servers are in use; add server URLs "
                    "or lower the pool's max_hosts"
                )
            url = free[0]
            self._in_use.add(url)

        async def release() -> None:
            self._in_use.discard(url)

        try:
            return await RemoteHost.connect(
                spec, url, self.config.token, self.config.timeouts, on_close=release
            )
        except BaseException:
            await release()
            raise

    async def sweep_orphans(self, pool_name: str) -> int:
        """Reset every slot of every server not in use (what a killed run left running)."""
        swept = 0
        for url in self.config.urls:
            if url in self._in_use:
                continue
            client = ServerClient(url, self.config.token, self.config.timeouts)
            try:
                info = await client.health()
                for index in range(int(info.get("slots", 0))):
                    await client.reset(index)
                swept += 1
            except SandboxError:
                continue  # unreachable servers are not ours to clean now
            finally:
                await client.aclose()
        return swept
