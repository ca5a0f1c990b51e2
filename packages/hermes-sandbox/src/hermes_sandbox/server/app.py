"""The sandbox server: one host of ``slots`` workspaces behind a small authenticated HTTP API.

Routes (under ``/v1``; every route but ``/health`` needs ``Authorization: Bearer <token>``)::

    GET    /health                     liveness, slot count
    GET    /slots                      {"slots": [{"index", "slot_id", "workspace"}]}
    POST   /slots/{i}/exec             JSON exec request -> ExecResult JSON
    POST   /exec_batch                 {"requests": [{"slot": i, ...exec}]} -> {"results": [...]}
    GET    /slots/{i}/file?path=P      file bytes, streamed
    PUT    /slots/{i}/file?path=P      request body (streamed) becomes the file
    POST   /slots/{i}/reset            empty the workspace, kill its processes
    POST   /slots/{i}/archive          {"name"?, "path"?} -> tar.gz artifact of the workspace
    GET    /artifacts                  {"artifacts": [{"name", "size"}]}
    GET    /artifacts/{name}           artifact bytes, streamed
    DELETE /artifacts/{name}

File bodies never pass through a command's stdout, so their size is not limited by it.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import attrs
from hermes_protocols import ExecResult, FileTransfer, SandboxError, Slot
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from hermes_sandbox.backends.base import Host, HostBackend, HostSpec, MachineSlotsBackend
from hermes_sandbox.budget import MachineBudget
from hermes_sandbox.server import wire

logger = logging.getLogger(__name__)

_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_CHUNK = 1 << 20

Handler = Callable[[Request], Awaitable[Response]]


@attrs.frozen(slots=True, kw_only=True)
class ServerConfig:
    """What one server offers: ``slots`` workspaces, files under ``data_dir``."""

    slots: int
    data_dir: str
    token: str
    pool_name: str = "hermes-server"
    max_batch: int = 512

    def __attrs_post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError("slots must be at least 1")
        if len(self.token) < 8:
            raise ValueError("the server token must be at least 8 characters")


def _error(exc: BaseException) -> JSONResponse:
    status, kind = wire.error_kind(exc)
    return JSONResponse({"error": kind, "message": str(exc)}, status_code=status)


class _Server:
    """The running server's state: its host and directories (one instance per app)."""

    def __init__(self, config: ServerConfig, backend: HostBackend) -> None:
        self.config = config
        self.backend = backend
        self.host: Host | None = None
        self.tmp_dir = os.path.join(config.data_dir, "tmp")
        self.artifacts_dir = os.path.join(config.data_dir, "artifacts")
        self._expected = f"Bearer {config.token}".encode()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            await self._start()
        except BaseException as exc:
            app.state.startup_error = exc  # serve() re-raises it; uvicorn only logs it
            raise
        assert self.host is not None
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.host.close()

    async def _start(self) -> None:
        # Slots may run as unprivileged uids (bwrap as root): they must traverse data_dir.
        await anyio.Path(self.config.data_dir).mkdir(parents=True, exist_ok=True)
        await anyio.Path(self.config.data_dir).chmod(0o755)
        for d in (self.tmp_dir, self.artifacts_dir):
            await anyio.Path(d).mkdir(mode=0o700, exist_ok=True)
        if isinstance(self.backend, MachineSlotsBackend):
            for note in self.backend.fit_budget(MachineBudget(), self.config.slots):
                logger.warning("sandbox server: clamped %s", note)
        swept = await self.backend.sweep_orphans(self.config.pool_name)
        if swept:
            logger.info("sandbox server: removed %d orphaned host(s)", swept)
        host_id = f"{self.config.pool_name}--{uuid.uuid4().hex[:12]}"
        spec = HostSpec(self.config.pool_name, host_id, self.config.slots)
        self.host = await self.backend.start_host(spec)

    # -- plumbing -----------------------------------------------------------------------

    def guarded(self, handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self._expected):
                return JSONResponse(
                    {"error": "unauthorized", "message": "missing or wrong bearer token"},
                    status_code=401,
                )
            try:
                return await handler(request)
            except Exception as exc:
                if not isinstance(exc, OSError | ValueError | SandboxError):
                    logger.exception("sandbox server: %s %s failed", request.method, request.url)
                return _error(exc)

        return endpoint

    def _slot(self, request: Request) -> tuple[int, Slot]:
        assert self.host is not None
        raw = request.path_params["index"]
        index = int(raw)
        if not 0 <= index < self.config.slots:
            raise wire.NoSuchSlot(
                f"slot {index} does not exist (this server has {self.config.slots})"
            )
        return index, self.host.slot(index)

    def _tmp_path(self) -> str:
        return os.path.join(self.tmp_dir, uuid.uuid4().hex)

    # -- handlers -----------------------------------------------------------------------

    async def health(self, _request: Request) -> Response:
        ok = self.host is not None and await self.host.healthy()
        return JSONResponse(
            {
                "status": "ok" if ok else "unhealthy",
                "slots": self.config.slots,
                "host_id": self.host.host_id if self.host else None,
                "protocol": wire.PROTOCOL_VERSION,
            },
            status_code=200 if ok else 503,
        )

    async def list_slots(self, _request: Request) -> Response:
        assert self.host is not None
        host = self.host
        slots = [host.slot(i) for i in range(self.config.slots)]
        return JSONResponse(
            {
                "slots": [
                    {"index": i, "slot_id": slot.slot_id, "workspace": slot.workspace}
                    for i, slot in enumerate(slots)
                ]
            }
        )

    async def exec(self, request: Request) -> Response:
        _, slot = self._slot(request)
        kwargs = wire.parse_exec_request(await request.json())
        result = await slot.exec(**kwargs)
        return JSONResponse(wire.result_to_wire(result))

    async def exec_batch(self, request: Request) -> Response:
        body = await request.json()
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or len(requests) > self.config.max_batch:
            raise ValueError(f"'requests' must be a list of at most {self.config.max_batch}")
        assert self.host is not None
        host = self.host
        results: list[dict[str, Any]] = [{} for _ in requests]

        async def run(i: int, item: Any) -> None:
            try:
                index = item.get("slot") if isinstance(item, dict) else None
                if not isinstance(index, int) or not 0 <= index < self.config.slots:
                    raise wire.NoSuchSlot(f"request {i}: no slot {index!r}")
                result: ExecResult = await host.slot(index).exec(**wire.parse_exec_request(item))
                results[i] = wire.result_to_wire(result)
            except Exception as exc:
                status, kind = wire.error_kind(exc)
                results[i] = {"error": kind, "message": str(exc), "status": status}

        async with anyio.create_task_group() as tg:
            for i, item in enumerate(requests):
                tg.start_soon(run, i, item)
        return JSONResponse({"results": results})

    async def read_file(self, request: Request) -> Response:
        _, slot = self._slot(request)
        path = request.query_params["path"]
        if not isinstance(slot, FileTransfer):
            return Response(await slot.read_file(path), media_type="application/octet-stream")
        tmp = self._tmp_path()
        try:
            await slot.download(path, tmp)
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(FileNotFoundError):
                await anyio.Path(tmp).unlink()
            raise
        return FileResponse(
            tmp, media_type="application/octet-stream", background=BackgroundTask(_unlink, tmp)
        )

    async def write_file(self, request: Request) -> Response:
        _, slot = self._slot(request)
        path = request.query_params["path"]
        tmp = self._tmp_path()
        try:
            async with await anyio.open_file(tmp, "wb") as f:
                async for chunk in request.stream():
                    await f.write(chunk)
            if isinstance(slot, FileTransfer):
                await slot.upload(tmp, path)
            else:
                await slot.write_file(path, await anyio.Path(tmp).read_bytes())
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(FileNotFoundError):
                await anyio.Path(tmp).unlink()
        return Response(status_code=204)

    async def reset(self, request: Request) -> Response:
        index, _ = self._slot(request)
        assert self.host is not None
        await self.host.reset_slot(index)
        return Response(status_code=204)

    async def archive(self, request: Request) -> Response:
        _, slot = self._slot(request)
        body = await request.json() if await request.body() else {}
        name = str(body.get("name") or f"{uuid.uuid4().hex}.tar.gz")
        if not _ARTIFACT_NAME.match(name):
            raise ValueError(f"bad artifact name {name!r}")
        member = f".hermes-archive-{uuid.uuid4().hex}.tar.gz"
        source = str(body.get("path") or ".")
        cwd = None if source == "." else source
        member_path = member if cwd is None else f"{source.rstrip('/')}/{member}"
        dest = os.path.join(self.artifacts_dir, name)
        script = (
            f"tar -czf {member} --exclude=./{member} . 2>/dev/null; "
            f"test -s {member} || {{ echo 'tar failed' >&2; exit 1; }}"
        )
        try:
            result = await slot.exec(script, timeout=600, cwd=cwd)
            if not result.ok:
                raise SandboxError(f"archiving {source!r} failed: {result.stderr.strip()}")
            if isinstance(slot, FileTransfer):
                await slot.download(member_path, dest)
            else:
                await anyio.Path(dest).write_bytes(await slot.read_file(member_path))
        finally:
            with anyio.CancelScope(shield=True):
                await slot.exec(f"rm -f {member}", timeout=60, cwd=cwd)
        size = (await anyio.Path(dest).stat()).st_size
        return JSONResponse({"name": name, "size": size})

    def _artifact(self, request: Request) -> str:
        name = request.path_params["name"]
        if not _ARTIFACT_NAME.match(name):
            raise ValueError(f"bad artifact name {name!r}")
        return os.path.join(self.artifacts_dir, name)

    async def list_artifacts(self, _request: Request) -> Response:
        items = []
        async for entry in anyio.Path(self.artifacts_dir).iterdir():
            stat = await entry.stat()
            items.append({"name": entry.name, "size": stat.st_size})
        items.sort(key=lambda item: str(item["name"]))
        return JSONResponse({"artifacts": items})

    async def read_artifact(self, request: Request) -> Response:
        path = self._artifact(request)
        if not await anyio.Path(path).is_file():
            raise FileNotFoundError(f"no artifact {request.path_params['name']!r}")
        return FileResponse(path, media_type="application/octet-stream")

    async def delete_artifact(self, request: Request) -> Response:
        path = self._artifact(request)
        try:
            await anyio.Path(path).unlink()
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"no artifact {request.path_params['name']!r}") from exc
        return Response(status_code=204)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def create_app(config: ServerConfig, backend: HostBackend) -> Starlette:
    """The ASGI app; it starts its host on startup and closes it on shutdown."""
    server = _Server(config, backend)
    g = server.guarded
    p = wire.API_PREFIX
    routes = [
        Route(f"{p}/health", server.health, methods=["GET"]),
        Route(f"{p}/slots", g(server.list_slots), methods=["GET"]),
        Route(f"{p}/slots/{{index:int}}/exec", g(server.exec), methods=["POST"]),
        Route(f"{p}/exec_batch", g(server.exec_batch), methods=["POST"]),
        Route(f"{p}/slots/{{index:int}}/file", g(server.read_file), methods=["GET"]),
        Route(f"{p}/slots/{{index:int}}/file", g(server.write_file), methods=["PUT"]),
        Route(f"{p}/slots/{{index:int}}/reset", g(server.reset), methods=["POST"]),
        Route(f"{p}/slots/{{index:int}}/archive", g(server.archive), methods=["POST"]),
        Route(f"{p}/artifacts", g(server.list_artifacts), methods=["GET"]),
        Route(f"{p}/artifacts/{{name}}", g(server.read_artifact), methods=["GET"]),
        Route(f"{p}/artifacts/{{name}}", g(server.delete_artifact), methods=["DELETE"]),
    ]
    return Starlette(routes=routes, lifespan=server.lifespan)
