"""Binary-safe file access to a slot workspace that lives on this machine's filesystem."""

from __future__ import annotations

import os
import shutil

import anyio

from hermes_sandbox._paths import open_beneath
from hermes_sandbox.file_window import DEFAULT_MAX_READ_BYTES, TextWindow, read_capped, read_window

_CHUNK = 1 << 20


class WorkspaceFiles:
    """Reads and writes files of a workspace directory directly, confined to it.

    ``inner_root`` is the workspace as commands see it (``/workspace`` inside bwrap, the host
    path for the local backend); ``owner`` (uid, gid) owns every file and directory written.
    Whole-file reads refuse files over ``max_read_bytes`` (:class:`FileTooLarge`).
    """

    def __init__(
        self,
        host_root: str,
        inner_root: str,
        owner: tuple[int, int] | None,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    ) -> None:
        self.host_root = host_root
        self.inner_root = inner_root
        self.owner = owner
        self.max_read_bytes = max_read_bytes

    def _open_read(self, path: str) -> int:
        return open_beneath(self.host_root, path, self.inner_root, os.O_RDONLY)

    def _open_write(self, path: str) -> int:
        return open_beneath(
            self.host_root,
            path,
            self.inner_root,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
            make_parents=True,
            owner=self.owner,
        )

    def _read(self, path: str, cap: int | None = None) -> bytes:
        limit = self.max_read_bytes if cap is None else min(cap, self.max_read_bytes)
        with os.fdopen(self._open_read(path), "rb") as f:
            return read_capped(f, path, os.fstat(f.fileno()).st_size, limit)

    def _window(self, path: str, first: int, max_lines: int, max_line_bytes: int) -> TextWindow:
        with os.fdopen(self._open_read(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return read_window(f, size, first, max_lines, max_line_bytes)

    def _write(self, path: str, data: bytes) -> None:
        with os.fdopen(self._open_write(path), "wb") as f:
            f.write(data)

    def _upload(self, local_path: str, path: str) -> None:
        with open(local_path, "rb") as src, os.fdopen(self._open_write(path), "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)

    def _download(self, path: str, local_path: str) -> None:
        with os.fdopen(self._open_read(path), "rb") as src, open(local_path, "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)

    async def read(self, path: str) -> bytes:
        return await anyio.to_thread.run_sync(self._read, path)

    async def read_capped(self, path: str, max_bytes: int) -> bytes:
        return await anyio.to_thread.run_sync(self._read, path, max_bytes)

    async def read_window(
        self, path: str, first: int, max_lines: int, max_line_bytes: int
    ) -> TextWindow:
        return await anyio.to_thread.run_sync(self._window, path, first, max_lines, max_line_bytes)

    async def write(self, path: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write, path, bytes(data))

    async def upload(self, local_path: str, path: str) -> None:
        await anyio.to_thread.run_sync(self._upload, local_path, path)

    async def download(self, path: str, local_path: str) -> None:
        await anyio.to_thread.run_sync(self._download, path, local_path)


class HostFilesSlot:
    """Base of slots whose workspace is a host directory: the Slot/FileTransfer file methods,
    served by ``self._files``, plus the bounded reads of
    :class:`~hermes_sandbox.file_window.WindowedFiles`."""

    _files: WorkspaceFiles

    async def read_file(self, path: str) -> bytes:
        return await self._files.read(path)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._files.write(path, data)

    async def read_capped(self, path: str, max_bytes: int) -> bytes:
        return await self._files.read_capped(path, max_bytes)

    async def read_window(
        self, path: str, first: int, max_lines: int, max_line_bytes: int
    ) -> TextWindow:
        return await self._files.read_window(path, first, max_lines, max_line_bytes)

    async def upload(self, local_path: str, remote_path: str) -> None:
        await self._files.upload(local_path, remote_path)

    async def download(self, remote_path: str, local_path: str) -> None:
        await self._files.download(remote_path, local_path)
