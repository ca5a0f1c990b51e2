"""Issue 30: a host whose owner is SIGKILLed is removed at once by its reaper (mounts,
directories, cgroups, sandboxed processes), and a normal close leaves the reaper nothing to do.

The owner here is a child process running a real bwrap host, as a Ray host actor does on its
node (``backends/ray_actor.py``; the Ray path itself is tested in ``tests/test_apps_on_ray.py``).
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import anyio
import psutil
import pytest
from hermes_sandbox import BwrapBackend, BwrapConfig
from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for
from hermes_sandbox.backends.host_reaper import HostReaper

pytestmark = pytest.mark.anyio

AS_ROOT = os.geteuid() == 0  # slot tmpfs are mounted (and cgroups made) as root only


def _spec(root: Path) -> HostSpec:
    """A host id of this test's own: slot processes are found (and killed) machine-wide by
    their host id, so two tests (other xdist workers) must not share one."""
    pool = f"reaped-{root.name}"
    return HostSpec(pool_name=pool, host_id=f"{pool}--h0", slots=2)


_OWNER = """
import anyio, os
from hermes_sandbox import BwrapBackend, BwrapConfig
from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.host_reaper import HostReaper
async def main():
    backend = BwrapBackend(BwrapConfig(root_dir={root!r}))
    await HostReaper.start(os.path.join({root!r}, {host_id!r}))
    host = await backend.start_host(HostSpec({pool!r}, {host_id!r}, 2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: host.slot(0).exec("sleep 600", timeout=900))
        await anyio.sleep(1)
        print("ready", flush=True)
        await anyio.sleep(600)
anyio.run(main)
"""


def _mounts(root: Path) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [p for p in (line.split()[4] for line in f) if p.startswith(f"{root}/")]


def _cgroup_hosts(root: Path) -> list[str]:
    bases = controller_bases(subtree_for(str(root))).values()
    return [name for base in bases if os.path.isdir(base) for name in os.listdir(base)]


def _slot_processes(host_id: str) -> list[int]:
    """Processes started in a slot of ``host_id`` (bwrap marks their environment)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("HERMES_SANDBOX_SLOT", "").startswith(f"{host_id}/"):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def _reapers(host_dir: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if "hermes_sandbox.backends.host_reaper" in (cmd := proc.info["cmdline"] or []):
            alive = proc.info["status"] != psutil.STATUS_ZOMBIE
            found += [proc.pid] if alive and str(host_dir) in cmd else []
    return found


def _left(root: Path) -> list[str]:
    host_id = _spec(root).host_id
    host = root / host_id
    return [
        *([f"directory {host}"] if host.exists() else []),
        *(f"mount {m}" for m in _mounts(root)),
        *(f"cgroup {c}" for c in _cgroup_hosts(root)),
        *(f"process {p}" for p in _slot_processes(host_id)),
    ]


async def test_a_sigkilled_owner_leaves_nothing_once_its_reaper_ran(sandbox_root: Path) -> None:
    spec = _spec(sandbox_root)
    host_id = spec.host_id
    script = textwrap.dedent(_OWNER).format(
        root=str(sandbox_root), pool=spec.pool_name, host_id=host_id
    )
    owner = await anyio.open_process([sys.executable, "-c", script], stderr=None)
    try:
        assert owner.stdout is not None
        with anyio.fail_after(120):
            assert (await owner.stdout.receive()).startswith(b"ready")
        held = _left(sandbox_root)
        assert f"directory {sandbox_root / host_id}" in held
        assert any(what.startswith("process ") for what in held), held  # the sleeping command
        if AS_ROOT:
            assert any(what.startswith("mount ") for what in held), held  # the slots' tmpfs
    finally:
        owner.send_signal(signal.SIGKILL)
        with anyio.fail_after(10):
            await owner.wait()
        await owner.aclose()
    deadline = time.monotonic() + 15
    while (left := _left(sandbox_root)) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the machine
        await anyio.sleep(0.2)
    assert left == [], "the reaper did not remove the dead owner's host"


async def test_a_host_closed_normally_is_left_to_its_owner(sandbox_root: Path) -> None:
    spec = _spec(sandbox_root)
    host_dir = sandbox_root / spec.host_id
    reaper = await HostReaper.start(str(host_dir))
    host = await BwrapBackend(BwrapConfig(root_dir=str(sandbox_root))).start_host(spec)
    assert (await host.slot(1).exec("echo up", timeout=60)).ok
    assert len(_reapers(host_dir)) == 1
    await reaper.stop()  # before the host closes: the reaper must not touch it
    assert _reapers(host_dir) == []
    assert host_dir.exists()
    assert await host.healthy()
    await host.close()
    assert _left(sandbox_root) == []
