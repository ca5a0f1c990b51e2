"""Issue 24 finding 5 (bwrap's part) and the cleanup command: leftovers of dead pools (any name,
any root, bwrap and local) are removed by ``hermes-sandbox cleanup`` and at pool start; a live
pool's are never touched."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.backends import cgroups
from hermes_sandbox.backends._root_dir import register_root
from hermes_sandbox.backends._workspace_fs import mounts_beneath
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for
from hermes_sandbox.backends.gvisor import STATE_DIR

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AS_ROOT = os.geteuid() == 0  # slot tmpfs are mounted (and cgroups made) as root only

_DEAD_POOLS = """
import anyio
from hermes_sandbox import *
async def main():
    bwrap = BwrapBackend(BwrapConfig(root_dir={bwrap_root!r}))
    local = LocalBackend(LocalConfig(root_dir={local_root!r}))
    async with SandboxPool(bwrap, PoolConfig(name="dead-a", slots_per_host=2)) as a, \\
            SandboxPool(local, PoolConfig(name="dead-b", slots_per_host=1)) as b:
        for pool in (a, b):
            slot = await pool.acquire("t")
            await slot.write_file("big", b"x" * (8 << 20))
            await slot.exec("echo hi", timeout=30)
        print("ready", flush=True)
        await anyio.sleep(120)
anyio.run(main)
"""


async def _kill_pools_in_a_child(bwrap_root: Path, local_root: Path) -> None:
    """Run a bwrap pool and a local pool in a child process, then SIGKILL it."""
    script = textwrap.dedent(_DEAD_POOLS).format(
        bwrap_root=str(bwrap_root), local_root=str(local_root)
    )
    child = await anyio.open_process([sys.executable, "-c", script], stderr=None)
    try:
        assert child.stdout is not None
        with anyio.fail_after(120):
            line = await child.stdout.receive()
        assert line.startswith(b"ready"), line
    finally:
        child.send_signal(signal.SIGKILL)
        with anyio.fail_after(10):
            await child.wait()
        await child.aclose()


def _hosts(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _cgroup_hosts(root: Path) -> set[str]:
    bases = controller_bases(subtree_for(str(root))).values()
    return {
        name
        for base in bases
        if os.path.isdir(base)
        for name in os.listdir(base)
        if os.path.isdir(os.path.join(base, name))
    }


def _remove_roots(*roots: Path) -> None:
    for root in roots:
        shutil.rmtree(root)


async def _cleanup(*args: str) -> str:
    command = [sys.executable, "-m", "hermes_sandbox.cli", "cleanup", *args]
    return (await anyio.run_process(command)).stdout.decode()


async def test_cleanup_removes_every_dead_pool_and_keeps_the_live_one(sandbox_root: Path) -> None:
    bwrap_root, local_root = sandbox_root / "bwrap", sandbox_root / "local"
    backend = BwrapBackend(BwrapConfig(root_dir=str(bwrap_root)))
    async with SandboxPool(backend, PoolConfig(name="live", slots_per_host=1)) as pool:
        slot = await pool.acquire("live")
        assert (await slot.exec("echo up", timeout=30)).ok
        (live,) = _hosts(bwrap_root)
        await _kill_pools_in_a_child(bwrap_root, local_root)
        (dead_a,) = [h for h in _hosts(bwrap_root) if h != live]
        (dead_b,) = _hosts(local_root)
        assert (dead_a.split("--")[0], dead_b.split("--")[0]) == ("dead-a", "dead-b")

        # Without --root, the registry finds both roots (a dry run: nothing else is touched).
        listed = await _cleanup("--dry-run")
        assert f"would remove host {bwrap_root / dead_a}" in listed
        assert f"would remove host {local_root / dead_b}" in listed
        assert live not in listed
        assert _hosts(local_root) == [dead_b]

        report = await _cleanup("--only", "--root", str(bwrap_root), "--root", str(local_root))
        assert f"removed host {bwrap_root / dead_a}" in report
        assert f"removed host {local_root / dead_b}" in report
        assert live not in report
        assert _hosts(bwrap_root) == [live]
        assert _hosts(local_root) == []
        if AS_ROOT:
            assert f"removed mount {bwrap_root / dead_a}/slots/0" in report
            assert mounts_beneath(str(bwrap_root / live))  # the live slot's tmpfs stays
        if controller_bases(subtree_for(str(bwrap_root))):
            assert f"removed cgroup {subtree_for(str(bwrap_root))}/{dead_a}" in report
            assert _cgroup_hosts(bwrap_root) == {live}
        again = await slot.exec("echo still-up", timeout=30)  # its sandbox kept running
        assert again.stdout == "still-up\n"
        await pool.release(slot)
    _remove_roots(bwrap_root, local_root)


async def test_pool_start_removes_dead_pools_of_any_name_in_its_root(sandbox_root: Path) -> None:
    bwrap_root, local_root = sandbox_root / "bwrap", sandbox_root / "local"
    await _kill_pools_in_a_child(bwrap_root, local_root)
    (dead,) = _hosts(bwrap_root)
    if AS_ROOT:
        assert mounts_beneath(str(bwrap_root / dead))  # the mounted workspace tmpfs
    backend = BwrapBackend(BwrapConfig(root_dir=str(bwrap_root)))
    async with SandboxPool(backend, PoolConfig(name="another-name", slots_per_host=1)) as pool:
        assert pool.orphans_removed == 1
        assert _hosts(bwrap_root) == []
        assert mounts_beneath(str(bwrap_root)) == []
        assert _cgroup_hosts(bwrap_root) == set()
    assert "removed host" in await _cleanup("--only", "--root", str(local_root))
    _remove_roots(bwrap_root, local_root)


DOC = Path(__file__).resolve().parents[3] / "docs" / "sandbox.md"


async def test_the_documented_dry_run_runs_as_shown() -> None:
    """docs/sandbox.md's `hermes-sandbox cleanup --dry-run`, through the console script."""
    shown = re.findall(r"^\$ (hermes-sandbox cleanup --dry-run)$", DOC.read_text(), re.MULTILINE)
    assert shown == ["hermes-sandbox cleanup --dry-run"]
    script = Path(sys.executable).with_name("hermes-sandbox")
    done = await anyio.run_process([str(script), *shown[0].split()[1:]])
    *items, summary = done.stdout.decode().splitlines()
    assert re.fullmatch(
        r"hermes-sandbox cleanup: would remove \d+ leftover\(s\) of dead pools", summary
    )
    assert all(line.startswith("would remove ") for line in items)


async def test_gvisor_state_without_runsc_is_listed_as_skipped_not_a_failure(
    sandbox_root: Path,
) -> None:
    """A root holding runsc state on a machine whose ``runsc`` is not on PATH (CI's is in a
    cache directory): the cleanup says which root it skipped and why, and still exits 0."""
    state = sandbox_root / STATE_DIR
    state.mkdir()
    (state / "leftover.state").write_text("{}")
    register_root(str(sandbox_root))
    missing = sandbox_root / "no-such-runsc"
    try:
        command = [sys.executable, "-m", "hermes_sandbox.cli", "cleanup", "--dry-run"]
        done = await anyio.run_process([*command, "--runsc", str(missing)], check=False)
    finally:
        shutil.rmtree(state)
    assert done.returncode == 0, done.stderr.decode()
    assert f"could not remove gvisor sandboxes under {sandbox_root}: cannot run runsc" in (
        done.stderr.decode()
    )
    assert done.stdout.decode().splitlines()[-1].startswith("hermes-sandbox cleanup: would remove")


def test_a_subtree_removed_during_the_scan_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another pool may release its cgroup subtree between the scan's two listings (seen with
    three test workers starting pools at once): the scan goes on with the subtrees still there."""
    (tmp_path / "hermes-sandbox-kept" / "host-1").mkdir(parents=True)
    (tmp_path / "hermes-sandbox-gone").mkdir()
    (tmp_path / "unrelated" / "host-2").mkdir(parents=True)
    monkeypatch.setattr(cgroups, "_own_dirs", lambda: {"memory": str(tmp_path)})
    listdir = os.listdir

    def racing_listdir(path: str) -> list[str]:
        if path.endswith("hermes-sandbox-gone"):
            (tmp_path / "hermes-sandbox-gone").rmdir()
        return listdir(path)

    monkeypatch.setattr(os, "listdir", racing_listdir)
    assert cgroups.host_cgroups() == {("hermes-sandbox-kept", "host-1")}
