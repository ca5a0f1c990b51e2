"""Sandbox vocabulary: exec results, slots, the slot pool and their capability Protocols."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
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


def _context(
    files: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
) -> tuple[tuple[str, bytes], ...]:
    pairs = files.items() if isinstance(files, Mapping) else files
    return tuple(sorted((str(k), bytes(v)) for k, v in pairs))


@attrs.frozen(slots=True)
class SlotImage:
    """The container image one item's slot runs, and where the slot's workspace is in it.

    Either ``name`` (a prebuilt image, pulled when the backend lacks it) or ``build_context``
    (a Docker build context: relative path -> bytes, a ``Dockerfile`` at its root; built once by
    the backend within ``build_timeout_s`` and named by its content). ``workdir`` is the
    workspace inside the image (commands start there, relative paths resolve there, e.g. a
    task's ``/app``); ``None`` gives the backend's own per-slot directory. Commands run as the
    image's own user (its ``USER``, root when it names none).
    """

    name: str | None = None
    build_context: tuple[tuple[str, bytes], ...] = attrs.field(
        default=(), converter=_context, repr=False
    )
    workdir: str | None = None
    build_timeout_s: float = 600.0

    def __attrs_post_init__(self) -> None:
        if (self.name is None) == (not self.build_context):
            raise ValueError("a SlotImage has either a name or a build context")
        if self.build_context and "Dockerfile" not in dict(self.build_context):
            raise ValueError("a SlotImage build context needs a Dockerfile at its root")
        if self.workdir is not None and not posixpath.isabs(self.workdir):
            raise ValueError(f"SlotImage.workdir must be absolute, got {self.workdir!r}")
        if not self.build_timeout_s > 0:
            raise ValueError("SlotImage.build_timeout_s must be positive")


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


@runtime_checkable
class ImageSlotPool(Protocol):
    """Capability of a slot pool: a slot of its own running an item's :class:`SlotImage`.

    ``runs_images`` says whether the pool's sandbox can run images at all (containers can,
    bwrap cannot). ``acquire_image`` waits at most ``timeout`` seconds for room, then starts
    the slot (pulling or building the image first) and raises
    :class:`~hermes_protocols.errors.ImageUnavailable` naming the image when it cannot be had;
    ``release`` of that slot removes it.
    """

    @property
    def runs_images(self) -> bool: ...

    async def acquire_image(
        self, trajectory_id: str, image: SlotImage, *, timeout: float | None = None
    ) -> Slot: ...
