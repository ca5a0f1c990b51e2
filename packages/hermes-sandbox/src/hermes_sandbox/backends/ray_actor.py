"""The node side of the ``ray`` backend: one Ray actor per sandbox host.

:class:`SandboxHostActor` runs on a cluster node, in a Ray worker process of its own, and holds
one :class:`~hermes_sandbox.backends.bwrap.BwrapBackend` host there: the same slots, isolation,
limits and reset as the local ``bwrap`` backend. Its methods are async (a Ray async actor), so
commands of different slots run concurrently on the actor's event loop.

Errors a slot raises cross back as :class:`ActorFailure` (a kind of
:mod:`~hermes_sandbox.server.wire` and a message); the driver turns them into the same
exceptions a local slot raises. Anything else is a bug and crosses as Ray's own task error.

Files move in chunks of at most ``CHUNK_BYTES`` through staging files in the host's own
directory on the node, so neither side holds a whole large file in memory and no filesystem is
shared between driver and node.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Mapping

import anyio
from hermes_protocols import ExecResult, HermesError

from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.bwrap import BwrapBackend, BwrapConfig
from hermes_sandbox.backends.bwrap_slot import BwrapSlot
from hermes_sandbox.backends.directory_host import DirectoryHost
from hermes_sandbox.backends.host_reaper import HostReaper
from hermes_sandbox.file_window import TextWindow
from hermes_sandbox.server import wire

#: the largest piece of a file one actor call carries
CHUNK_BYTES = 1 << 20
STAGING_DIR = ".ray-staging"


class ActorFailure(Exception):
    """A slot operation failed on the node: ``(kind, message)`` as in the server's wire."""

    @property
    def kind(self) -> str:
        return str(self.args[0])

    @property
    def message(self) -> str:
        return str(self.args[1])


@contextlib.asynccontextmanager
async def _failures() -> AsyncIterator[None]:
    try:
        yield
    except (HermesError, OSError, ValueError, LookupError) as exc:
        raise ActorFailure(wire.error_kind(exc)[1], str(exc)) from None


class SandboxHostActor:
    """One bwrap host on the node this actor was placed on (created by the driver through
    ``ray.remote``; never detached, so it dies with the driver that owns it). A
    :class:`HostReaper` removes the host's mounts, directories and cgroups on the node when the
    actor dies without closing it."""

    def __init__(self, config: BwrapConfig) -> None:
        self._backend = BwrapBackend(config)
        self._host: DirectoryHost | None = None
        self._reaper: HostReaper | None = None
        self._staging = ""

    def _live(self) -> DirectoryHost:
        if self._host is None:
            raise ActorFailure("sandbox_error", "the sandbox host actor has no host (closed)")
        return self._host

    async def start(self, spec: HostSpec) -> tuple[str, list[str]]:
        """Remove dead runs' leftovers on this node, start the host; (node id, workspaces)."""
        import ray

        async with _failures():
            await self._backend.sweep_orphans(spec.pool_name)
            # watched before it exists: a kill at any later point leaves nothing behind
            self._reaper = await HostReaper.start(
                os.path.join(self._backend.config.root_dir, spec.host_id)
            )
            host = await self._backend.start_host(spec)
        assert isinstance(host, DirectoryHost)
        self._host = host
        self._staging = os.path.join(host.directory, STAGING_DIR)
        await anyio.Path(self._staging).mkdir(mode=0o700)
        workspaces = [host.slot(i).workspace for i in range(spec.slots)]
        return ray.get_runtime_context().get_node_id(), workspaces

    async def exec(
        self,
        index: int,
        command: str,
        timeout: float,
        cwd: str | None,
        env: Mapping[str, str] | None,
        stdin: bytes | None,
    ) -> ExecResult:
        async with _failures():
            slot = self._live().slot(index)
            return await slot.exec(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)

    async def read_file(self, index: int, path: str) -> bytes:
        async with _failures():
            return await self._live().slot(index).read_file(path)

    async def write_file(self, index: int, path: str, data: bytes) -> None:
        async with _failures():
            await self._live().slot(index).write_file(path, data)

    async def read_capped(self, index: int, path: str, max_bytes: int) -> bytes:
        async with _failures():
            return await self._slot_files(index).read_capped(path, max_bytes)

    async def read_window(
        self, index: int, path: str, first: int, max_lines: int, max_line_bytes: int
    ) -> TextWindow:
        async with _failures():
            slot = self._slot_files(index)
            return await slot.read_window(path, first, max_lines, max_line_bytes)

    def _slot_files(self, index: int) -> BwrapSlot:
        slot = self._live().slot(index)
        assert isinstance(slot, BwrapSlot)
        return slot

    def _staged(self, transfer: str) -> str:
        if not transfer.isalnum():
            raise ActorFailure("bad_request", f"bad transfer id {transfer!r}")
        return os.path.join(self._staging, transfer)

    async def upload_chunk(self, transfer: str, data: bytes) -> None:
        """Append ``data`` to the staging file of upload ``transfer`` (created on first use)."""
        self._live()
        async with await anyio.open_file(self._staged(transfer), "ab") as f:
            await f.write(data)

    async def upload_finish(self, transfer: str, index: int, path: str) -> None:
        """Move the staged upload into slot ``index`` at ``path`` (through the slot's own
        checks); the staging file is removed either way."""
        staged = self._staged(transfer)
        try:
            async with _failures():
                await self._slot_files(index).upload(staged, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                await anyio.Path(staged).unlink()

    async def download_start(self, index: int, path: str) -> tuple[str, int]:
        """Stage slot ``index``'s ``path`` for download; (transfer id, size in bytes)."""
        transfer = uuid.uuid4().hex
        staged = self._staged(transfer)
        async with _failures():
            await self._slot_files(index).download(path, staged)
        return transfer, (await anyio.Path(staged).stat()).st_size

    async def download_chunk(self, transfer: str, offset: int) -> bytes:
        async with await anyio.open_file(self._staged(transfer), "rb") as f:
            await f.seek(offset)
            return await f.read(CHUNK_BYTES)

    async def transfer_done(self, transfer: str) -> None:
        """Remove a transfer's staging file (an upload given up, a download finished)."""
        with contextlib.suppress(FileNotFoundError):
            await anyio.Path(self._staged(transfer)).unlink()

    async def reset_slot(self, index: int) -> None:
        async with _failures():
            await self._live().reset_slot(index)

    async def healthy(self) -> bool:
        return self._host is not None and await self._host.healthy()

    async def close(self) -> None:
        """Stop every slot and remove the host's directories (staging included)."""
        host, self._host = self._host, None
        if host is not None:
            await host.close()
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            await reaper.stop()
