"""Run the sandbox server under uvicorn on a socket we bind (so port 0 works)."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import uvicorn
from hermes_protocols import SandboxError

from hermes_sandbox.backends.base import HostBackend
from hermes_sandbox.server.app import ServerConfig, create_app

READY_PREFIX = "hermes-sandbox serving on "


async def serve(
    config: ServerConfig,
    backend: HostBackend,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str], None] | None = None,
    stop: anyio.Event | None = None,
    log_level: str = "warning",
) -> None:
    """Serve until ``stop`` is set or a signal arrives; ``on_ready(url)`` once the host is up.

    The host is started by the app's lifespan and closed when the server stops (also on
    SIGTERM/SIGINT). A failing startup raises its original error.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only then, and
    # without it every response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        bound_port = sock.getsockname()[1]
        app = create_app(config, backend)
        uv_config = uvicorn.Config(
            app,
            log_level=log_level,
            lifespan="on",
            access_log=False,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=30,
        )
        server = uvicorn.Server(uv_config)
        url_host = f"[{host}]" if family == socket.AF_INET6 else host
        url = f"http://{url_host}:{bound_port}"

        async def run_server() -> None:
            try:
                await server.serve([sock])
            except SystemExit as exc:  # uvicorn exits when the lifespan startup fails
                error = getattr(app.state, "startup_error", None)
                if isinstance(error, Exception):
                    raise error from None
                raise SandboxError(f"sandbox server failed to start (exit {exc.code})") from None
            finally:
                tg.cancel_scope.cancel()

        async def announce() -> None:
            # uvicorn exposes readiness only as a flag; run_server cancels this if it fails.
            while not server.started:  # noqa: ASYNC110
                await anyio.sleep(0.02)
            if on_ready is not None:
                on_ready(url)
            if stop is not None:
                await stop.wait()
                server.should_exit = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_server)
            tg.start_soon(announce)
    finally:
        sock.close()


@contextlib.asynccontextmanager
async def running_server(
    config: ServerConfig, backend: HostBackend, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serve in the background of the current event loop; yields the server's URL.

    On exit the server shuts down gracefully (its host closed) before this returns.
    """
    stop = anyio.Event()
    ready = anyio.Event()
    urls: list[str] = []

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    failure: list[BaseException] = []

    async def run() -> None:
        # Shielded: even when the caller is cancelled, the server shuts down gracefully
        # (closing its host) once ``stop`` is set, instead of dying with the host running.
        with anyio.CancelScope(shield=True):
            try:
                await serve(config, backend, host=host, port=port, on_ready=on_ready, stop=stop)
            except Exception as exc:
                failure.append(exc)
            finally:
                ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await ready.wait()
            if failure:
                raise failure[0]
            yield urls[0]
        finally:
            stop.set()


def print_ready(url: str) -> None:
    """The line a parent process waits for on stdout."""
    sys.stdout.write(f"{READY_PREFIX}{url}\n")
    sys.stdout.flush()
