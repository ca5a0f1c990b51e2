"""Issue 15 findings 2 and 5: file reads are bounded; bad paths are error results naming them."""

from __future__ import annotations

import io
import json
import shutil
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest
from hermes_protocols import Slot
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    SandboxPool,
)
from hermes_sandbox.file_window import FileTooLarge, read_window
from hermes_sandbox.tools import PatchTool, ReadFileTool, WriteFileTool

pytestmark = pytest.mark.anyio
T = TypeVar("T")


@pytest.fixture(params=["bwrap", "local"])
async def slot(request: pytest.FixtureRequest, sandbox_root: Path) -> AsyncIterator[Slot]:
    root = str(sandbox_root / request.param)
    backend = (
        BwrapBackend(BwrapConfig(root_dir=root))
        if request.param == "bwrap"
        else LocalBackend(LocalConfig(root_dir=root))
    )
    async with SandboxPool(backend, PoolConfig(name="files", slots_per_host=1)) as pool:
        acquired = await pool.acquire("t")
        yield acquired
        await pool.release(acquired)
    shutil.rmtree(root)


async def _peak_rss_growth(work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Run ``work``; return its result and how far this process's RSS rose above the start."""
    me = psutil.Process()
    start = me.memory_info().rss
    peak = start
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.005):
            peak = max(peak, me.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = await work()
    finally:
        stop.set()
        sampler.join()
    return result, peak - start


async def test_huge_files_never_load_into_the_host(slot: Slot) -> None:
    made = await slot.exec(
        "truncate -s 2G sparse.bin && yes 'hello world' | head -c 120M > big.txt", timeout=120
    )
    assert made.exit_code == 0, made.stderr
    with pytest.raises(FileTooLarge, match=r"'sparse\.bin' is 2048\.0 MiB"):
        await slot.read_file("sparse.bin")
    read = ReadFileTool()
    sparse, grew = await _peak_rss_growth(lambda: read(slot, {"path": "sparse.bin", "limit": 1}))
    assert sparse.is_error
    assert "binary" in sparse.content
    assert grew < 64 << 20
    window, grew = await _peak_rss_growth(
        lambda: read(slot, {"path": "big.txt", "offset": 10_000_000, "limit": 2})
    )
    assert not window.is_error, window.content
    assert window.content.startswith("10000000|hello world\n10000001|hello world")
    assert window.metadata["total_lines"] == (120 << 20) // 12
    assert grew < 64 << 20
    patched = await PatchTool()(slot, {"path": "big.txt", "old_string": "x", "new_string": "y"})
    assert patched.is_error
    assert "read it in windows" in json.loads(patched.content)["error"]


async def test_bad_paths_come_back_as_error_results_naming_the_path(slot: Slot) -> None:
    long_name = "n" * 300
    for tool, args in (
        (WriteFileTool(), {"path": f"dir/{long_name}/f.txt", "content": "x"}),
        (ReadFileTool(), {"path": f"{long_name}.txt"}),
        (PatchTool(), {"path": long_name, "old_string": "a", "new_string": "b"}),
    ):
        result = await tool(slot, args)
        assert result.is_error
        assert long_name in json.loads(result.content)["error"]
    missing = await ReadFileTool()(slot, {"path": "no/such/dir/file.txt"})
    assert json.loads(missing.content)["error"] == "file not found: no/such/dir/file.txt"
    with pytest.raises(FileNotFoundError) as caught:
        await slot.read_file("no/such/dir/file.txt")
    assert caught.value.filename == "no/such/dir/file.txt"


@pytest.mark.parametrize(
    ("data", "first", "lines", "total"),
    [
        (b"a\nb", 2, ("b",), 2),
        (b"a\nb", 3, (), 2),
        (b"a\nb\n", 1, ("a", "b"), 2),
        (b"", 1, (), 0),
        (b"x\n" * 5, 3, ("x", "x"), 5),
        (b"x\n" * 5, 6, (), 5),
        (b"y" * 5000 + b"\nz\n", 1, ("y" * 100, "z"), 2),
    ],
)
def test_windows_count_and_skip_lines_like_splitlines(
    data: bytes, first: int, lines: tuple[str, ...], total: int
) -> None:
    window = read_window(io.BytesIO(data), len(data), first, 2, 100)
    assert (window.lines, window.total_lines) == (lines, total)
