"""The adapter file the trainer rewrites: loaded when it appears and whenever it is replaced,
once however many groups ask at the same time, never again while it is unchanged."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
from hermes_rollouts import AdapterFile


def _replace(path: Path, content: bytes) -> None:
    staging = path.with_name(".staging")
    staging.write_bytes(content)
    os.replace(staging, path)


def test_the_adapter_is_loaded_when_it_appears_and_when_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "adapter.gguf"
    loads: list[bytes | None] = []

    async def load(target: str | Path | None) -> None:
        await anyio.sleep(0.01)  # other groups ask meanwhile
        loads.append(None if target is None else await anyio.Path(target).read_bytes())

    adapter = AdapterFile(path, load)

    async def main() -> None:
        assert await adapter.sync() is None  # no file yet: the base weights
        _replace(path, b"step 1")
        results: list[str | None] = []
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(lambda: _append(results, adapter))
        assert results == [hashlib.sha256(b"step 1").hexdigest()] * 4
        assert await adapter.sync() == results[0]
        _replace(path, b"step 2")
        assert await adapter.sync() == hashlib.sha256(b"step 2").hexdigest()
        path.unlink()  # a vanished file keeps the adapter in use
        assert await adapter.sync() == hashlib.sha256(b"step 2").hexdigest()

    anyio.run(main)
    assert loads == [b"step 1", b"step 2"]


async def _append(results: list[str | None], adapter: AdapterFile) -> None:
    results.append(await adapter.sync())
