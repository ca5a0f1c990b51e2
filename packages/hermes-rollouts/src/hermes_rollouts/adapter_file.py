"""A LoRA adapter file shared across processes: a trainer writes it, a sampler reloads it;
both name a version of it by its SHA-256."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import anyio
import anyio.to_thread
from hermes_loop.factory import LoraLoader

logger = logging.getLogger(__name__)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class AdapterFile:
    """A LoRA adapter file another process rewrites (atomically); :meth:`sync` loads it into
    the model whenever its inode, size or modification time changed."""

    def __init__(self, path: Path, load: LoraLoader) -> None:
        self.path = path
        self._load = load
        self._lock = anyio.Lock()
        self._loaded: tuple[int, int, int] | None = None
        self.sha256: str | None = None

    async def sync(self) -> str | None:
        """The SHA-256 of the adapter in use after loading any change (``None``: the base
        weights, until the file first appears)."""
        async with self._lock:
            try:
                stat = await anyio.Path(self.path).stat()
            except FileNotFoundError:
                return self.sha256
            version = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if version != self._loaded:
                sha256 = await anyio.to_thread.run_sync(file_sha256, self.path)
                await self._load(self.path)
                self._loaded, self.sha256 = version, sha256
                logger.info("loaded LoRA adapter %s (sha256 %s)", self.path, sha256[:12])
            return self.sha256
