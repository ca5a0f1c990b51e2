"""Conformance: binary-safe files, confinement to the workspace, reset on release."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hermes_protocols import FileTransfer, SlotPool, WorkspaceEscape

pytestmark = pytest.mark.anyio


async def test_text_binary_large_empty_files(make_pool: Callable[..., SlotPool]) -> None:
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        cases = {
            "text.txt": b"hello\nworld\n",
            "utf8.txt": "héllo wörld ✓ 日本\n".encode(),
            "binary.bin": bytes(range(256)) * 4,
            "big.bin": os.urandom(5 * 1024 * 1024),
            "empty": b"",
            "deep/er/nested.txt": b"nested",
        }
        for path, data in cases.items():
            await slot.write_file(path, data)
            assert await slot.read_file(path) == data
        sizes = await slot.exec("wc -c < big.bin; wc -c < empty; cat utf8.txt", timeout=30)
        assert sizes.stdout.split("\n")[:3] == [str(5 * 1024 * 1024), "0", "héllo wörld ✓ 日本"]
        assert (await slot.exec("printf 'made\\0inside' > made.bin", timeout=20)).ok
        assert await slot.read_file("made.bin") == b"made\0inside"
        assert await slot.read_file(f"{slot.workspace}/text.txt") == b"hello\nworld\n"
        await slot.write_file("text.txt", b"shorter")
        assert await slot.read_file("text.txt") == b"shorter"
        appended = await slot.exec(
            "echo more >> deep/er/nested.txt && cat deep/er/nested.txt", timeout=20
        )
        assert appended.stdout == "nestedmore\n"
        await pool.release(slot)


async def test_missing_directory_and_permission_errors(
    make_pool: Callable[..., SlotPool], backend_case: Any
) -> None:
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        with pytest.raises(FileNotFoundError):
            await slot.read_file("missing.txt")
        await slot.write_file("adir/file", b"x")
        with pytest.raises(IsADirectoryError):
            await slot.read_file("adir")
        with pytest.raises(IsADirectoryError):
            await slot.write_file("adir", b"x")
        if backend_case.unprivileged:
            await slot.write_file("secret", b"s")
            denied = await slot.exec("chmod 000 secret && cat secret", timeout=20)
            assert denied.exit_code != 0
            assert "Permission denied" in denied.stderr
        await pool.release(slot)


async def test_paths_cannot_escape_the_workspace(make_pool: Callable[..., SlotPool]) -> None:
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        for path in ("../escape", "a/../../escape", "/etc/passwd", "/", ""):
            with pytest.raises(WorkspaceEscape):
                await slot.read_file(path)
            with pytest.raises(WorkspaceEscape):
                await slot.write_file(path, b"x")
        made = await slot.exec(
            "ln -s /etc/passwd passwd-link && ln -s .. up && mkdir d && ln -s d inner", timeout=20
        )
        assert made.ok
        for path in ("passwd-link", "up/escape", "up"):
            with pytest.raises(WorkspaceEscape):
                await slot.read_file(path)
            with pytest.raises(WorkspaceEscape):
                await slot.write_file(path, b"x")
        await slot.write_file("inner/ok.txt", b"symlink inside the workspace is fine")
        assert await slot.read_file("d/ok.txt") == b"symlink inside the workspace is fine"
        await pool.release(slot)


async def test_upload_and_download(make_pool: Callable[..., SlotPool], tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    source, target = tmp_path / "source.bin", tmp_path / "target.bin"
    source.write_bytes(data)
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        assert isinstance(slot, FileTransfer)
        await slot.upload(str(source), "in/data.bin")
        check = await slot.exec("cp in/data.bin out.bin && wc -c < out.bin", timeout=20)
        assert check.stdout.strip() == str(len(data))
        await slot.download("out.bin", str(target))
        assert target.read_bytes() == data
        with pytest.raises(WorkspaceEscape):
            await slot.download("../x", str(target))
        await pool.release(slot)


async def test_release_resets_the_workspace(make_pool: Callable[..., SlotPool]) -> None:
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("first")
        await slot.write_file("left.txt", b"from the first trajectory")
        assert (await slot.exec("mkdir -p x/y && touch .hidden && chmod 000 x", timeout=20)).ok
        await pool.release(slot)
        again = await pool.acquire("second")
        assert again.slot_id == slot.slot_id
        listing = await again.exec("ls -A | wc -l", timeout=20)
        assert listing.stdout.strip() == "0"
        await again.write_file("kept.txt", b"k")
        await pool.release(again, reset=False)
        third = await pool.acquire("third")
        assert await third.read_file("kept.txt") == b"k"
        await pool.release(third)
