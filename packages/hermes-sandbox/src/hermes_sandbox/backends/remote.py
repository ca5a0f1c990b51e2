"""The ``remote`` backend: hosts are running ``hermes-sandbox serve`` servers, reached by URL.

A host is one server; its slots are the server's slots. Files stream both ways without size
limit. Requests go through :class:`~hermes_sandbox.backends.remote_client.ServerClient` (every
request under a timeout; transport failures raise SandboxError naming the server, timeouts
SandboxTimeout).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, ExecResult, SandboxError, Slot

from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.remote_client import RemoteTimeouts, ServerClient
from hermes_sandbox.server import wire

__all__ = [
    "RemoteBackend",
    "RemoteConfig",
    "RemoteHost",
    "RemoteSlot",
    "RemoteTimeouts",
    "ServerClient",
]


def _url_tuple(urls: Iterable[str]) -> tuple[str, ...]:
    return tuple(urls)


@attrs.frozen(slots=True, kw_only=True)
class RemoteConfig:
    """The servers this backend may use (one host each) and their bearer token."""

    urls: tuple[str, ...] = attrs.field(converter=_url_tuple)
    token: str
    timeouts: RemoteTimeouts = attrs.field(factory=RemoteTimeouts)

    def __attrs_post_init__(self) -> None:
        if not self.urls:
            raise ConfigError("RemoteConfig.urls needs at least one sandbox server URL")
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ConfigError(f"sandbox server URLs must start with http:// or https://: {bad}")


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
        """Reset every slot of every server not in use (what a killed run left running).

        Servers, and the slots of each, are reset concurrently; returns how many servers were
        reset (unreachable servers are skipped: they are not ours to clean now).
        """
        swept: list[str] = []

        async def sweep(url: str) -> None:
            client = ServerClient(url, self.config.token, self.config.timeouts)
            failed: list[SandboxError] = []

            async def reset(index: int) -> None:
                try:
                    await client.reset(index)
                except SandboxError as exc:
                    failed.append(exc)

            try:
                info = await client.health()
                async with anyio.create_task_group() as tg:
                    for index in range(int(info.get("slots", 0))):
                        tg.start_soon(reset, index)
                if not failed:
                    swept.append(url)
            except SandboxError:
                return
            finally:
                await client.aclose()

        async with anyio.create_task_group() as tg:
            for url in self.config.urls:
                if url not in self._in_use:
                    tg.start_soon(sweep, url)
        return len(swept)
