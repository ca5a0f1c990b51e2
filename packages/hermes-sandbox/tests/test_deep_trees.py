"""Issue 15 finding 1: trees a slot builds cannot take a pool (or the orphan sweep) down."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    SandboxPool,
)
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.server import ServerConfig, running_server

pytestmark = pytest.mark.anyio

# Deeper than Python's recursion limit and, with 3-byte components, longer than PATH_MAX.
DEPTH = 1500


def _deep_tree(base: Path, depth: int) -> None:
    """``base/dd/dd/...`` ``depth`` levels, some dirs locked (000, 0500), files on the way."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    locked: list[tuple[int, str]] = []
    try:
        for level in range(depth):
            os.mkdir("dd", dir_fd=fd)
            if level % 100 == 0:
                with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
                    f.write("x")
            child = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            if level % 500 == 250:
                locked.append((os.dup(fd), "dd"))
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    for parent_fd, name in locked:  # lock from the top only after the walk went through
        os.chmod(name, 0o000 if len(locked) % 2 else 0o500, dir_fd=parent_fd)
        os.close(parent_fd)


def test_remove_tree_takes_deep_locked_trees_and_never_follows_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    tree = tmp_path / "tree"
    tree.mkdir()
    _deep_tree(tree, DEPTH)
    (tree / "escape").symlink_to(outside)
    (tree / "escape-dir").symlink_to(tmp_path)
    before = tmp_path / "before"
    before.mkdir()
    _deep_tree(before, DEPTH)
    # What the pool used before: shutil.rmtree recurses and dies on such a tree.
    with pytest.raises((RecursionError, OSError)):
        shutil.rmtree(before)
    remove_tree(str(before))
    remove_tree(str(tree))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt"]
    assert outside.read_text() == "keep me"
    remove_tree(str(tree))  # missing is fine


_BUILD_IN_SLOT = (
    "mkdir -p $(printf 'd/%.0s' $(seq 1100)) && chmod 0 d/d/d/d/d/d/d/d/d/d && chmod 0500 d/d/d"
)


def _backends(root: Path) -> dict[str, LocalBackend | BwrapBackend]:
    return {
        "bwrap": BwrapBackend(BwrapConfig(root_dir=str(root / "bwrap"))),
        "local": LocalBackend(LocalConfig(root_dir=str(root / "local"))),
    }


@pytest.mark.parametrize("kind", ["bwrap", "local"])
async def test_deep_trees_in_a_slot_do_not_break_reset_or_close(
    sandbox_root: Path, kind: str
) -> None:
    backend = _backends(sandbox_root)[kind]
    deep_file = "/".join(["w"] * 2100) + "/f.txt"
    async with SandboxPool(backend, PoolConfig(name="deep", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        built = await slot.exec(_BUILD_IN_SLOT, timeout=120)
        assert built.exit_code == 0, built.stderr
        await slot.write_file(deep_file, b"deep")
        await pool.release(slot)  # reset: must empty the workspace
        again = await pool.acquire("t")
        assert again.slot_id == slot.slot_id
        assert (await again.exec("ls -A | wc -l", timeout=30)).stdout.strip() == "0"
        assert (await again.exec(_BUILD_IN_SLOT, timeout=120)).exit_code == 0
        await pool.release(again, reset=False)
    shutil.rmtree(sandbox_root / kind)


def _dead_host(root: Path, name: str) -> Path:
    host = root / name
    (host / "slots" / "0").mkdir(parents=True)
    (host / "owner.json").write_text(json.dumps({"pid": 999_999_999, "start_time": "1"}))
    return host


def _chattr(flag: str, path: Path) -> bool:
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("kind", ["bwrap", "local"])
async def test_orphan_sweep_reports_and_skips_what_it_cannot_remove(
    sandbox_root: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = sandbox_root / kind
    root.mkdir(mode=0o711)
    deep = _dead_host(root, "sweep--deep")
    _deep_tree(deep / "slots" / "0", DEPTH)
    stuck = _dead_host(root, "sweep--stuck")
    pinned = stuck / "slots" / "0" / "immutable"
    pinned.write_text("x")
    if not _chattr("+i", pinned):
        shutil.rmtree(root)
        pytest.skip("cannot make an unremovable file here (chattr +i needs root and ext4/xfs)")
    try:
        backend = _backends(sandbox_root)[kind]
        async with SandboxPool(backend, PoolConfig(name="sweep", min_hosts=1)) as pool:
            assert pool.orphans_removed >= 1
            slot = await pool.acquire("t")
            assert (await slot.exec("echo up", timeout=30)).stdout == "up\n"
            await pool.release(slot)
        assert not deep.exists()
        assert stuck.exists()  # reported and skipped: the pool started anyway
        assert "orphan sweep skipped" in caplog.text
        assert "sweep--stuck" in caplog.text
    finally:
        _chattr("-i", pinned)
    shutil.rmtree(root)


async def test_sandbox_server_starts_over_leftovers_it_cannot_remove(sandbox_root: Path) -> None:
    data = sandbox_root / "data"
    hosts = data / "hosts"
    hosts.mkdir(parents=True, mode=0o711)
    deep = _dead_host(hosts, "hermes-server--deep")
    _deep_tree(deep / "slots" / "0", DEPTH)
    pinned = _dead_host(hosts, "hermes-server--stuck") / "slots" / "0" / "immutable"
    pinned.write_text("x")
    if not _chattr("+i", pinned):
        shutil.rmtree(data)
        pytest.skip("cannot make an unremovable file here (chattr +i needs root and ext4/xfs)")
    config = ServerConfig(slots=1, data_dir=str(data), token="t" * 16)
    try:
        async with running_server(config, BwrapBackend(BwrapConfig(root_dir=str(hosts)))) as url:
            async with httpx.AsyncClient(base_url=url) as client:
                response = await client.get("/v1/health")
            assert response.status_code == 200, response.text
        assert not deep.exists()
    finally:
        _chattr("-i", pinned)
    shutil.rmtree(data)
