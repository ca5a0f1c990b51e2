"""The HTTP client of one sandbox server (``hermes-sandbox serve``), used by the remote backend.

Every request has a timeout (an exec's is its own timeout plus a margin); transport failures
raise :class:`~hermes_protocols.SandboxError` naming the server, timeouts
:class:`~hermes_protocols.SandboxTimeout`, and error responses the typed error the server sent.
Files stream both ways in 1 MiB chunks without size limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import attrs
import httpx
from hermes_protocols import ExecResult, SandboxError, SandboxTimeout

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
