"""Sandbox vocabulary: exec results, slots, the slot pool and their capability Protocols."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Protocol, runtime_checkable

import attrs


@attrs.frozen(slots=True)
class ExecResult:
    """The outcome of one command in a slot.

    ``timed_out`` commands report exit code 124 (as ``timeout(1)`` does); ``truncated`` says the
    captured output was capped and part of it was cut.
    """

    exit_code: int
    stdout: str
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Slot(Protocol):
    """One isolated workspace inside a sandbox host, held by one trajectory at a time.

    Paths are relative to the workspace unless absolute; file operations are binary-safe.
    """

    @property
    def slot_id(self) -> str: ...

    @property
    def workspace(self) -> str:
        """The workspace directory as commands inside the slot see it."""
        ...

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> None: ...


@runtime_checkable
class FileTransfer(Protocol):
    """Capability: move files of any size between the host and a slot, binary-safe."""

    async def upload(self, local_path: str, remote_path: str) -> None: ...

    async def download(self, remote_path: str, local_path: str) -> None: ...


@attrs.frozen(slots=True)
class PoolStats:
    """A snapshot of a slot pool."""

    hosts: int
    slots_total: int
    slots_free: int
    slots_busy: int
    acquires: int = 0
    acquire_wait_p50_s: float = 0.0
    acquire_wait_max_s: float = 0.0


@runtime_checkable
class SlotPool(Protocol):
    """Hands out slots to trajectories; an async context manager that tears everything down.

    ``acquire`` waits at most ``timeout`` seconds (the pool's default when ``None``) and raises
    :class:`~hermes_protocols.errors.AcquireTimeout` after that. ``release`` resets the workspace
    unless ``reset=False``.
    """

    async def __aenter__(self) -> SlotPool: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...

    async def acquire(self, trajectory_id: str, *, timeout: float | None = None) -> Slot: ...

    async def release(self, slot: Slot, *, reset: bool = True) -> None: ...

    def stats(self) -> PoolStats: ...
