"""SandboxPool: scaling, idle scale-down, acquire timeout, health, teardown, orphan sweep."""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hermes_protocols import AcquireTimeout, ConfigError, SandboxError
from hermes_sandbox import HostSpec, LocalBackend, LocalConfig, PoolConfig, SandboxPool
from hermes_sandbox.backends.base import Host

pytestmark = pytest.mark.anyio


async def _eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await anyio.sleep(0.05)
    return check()


def _local(root: Path) -> LocalBackend:
    return LocalBackend(LocalConfig(root_dir=str(root)))


async def test_scales_up_to_max_hosts_when_acquires_wait(sandbox_root: Path) -> None:
    config = PoolConfig(name="scale", slots_per_host=2, max_hosts=3)
    async with SandboxPool(_local(sandbox_root), config) as pool:
        assert pool.stats().hosts == 0
        slots = [await pool.acquire(f"t{i}") for i in range(5)]
        stats = pool.stats()
        assert (stats.hosts, stats.slots_total, stats.slots_busy, stats.slots_free) == (3, 6, 5, 1)
        assert len({slot.slot_id for slot in slots}) == 5
        assert stats.acquires == 5
        assert stats.acquire_wait_max_s >= stats.acquire_wait_p50_s > 0
        for slot in slots:
            await pool.release(slot)
        assert pool.stats().slots_free == 6


async def test_acquire_timeout_then_a_waiter_gets_the_released_slot(sandbox_root: Path) -> None:
    config = PoolConfig(name="wait", slots_per_host=1, max_hosts=1)
    async with SandboxPool(_local(sandbox_root), config) as pool:
        held = await pool.acquire("holder")
        with pytest.raises(AcquireTimeout, match="max_hosts") as info:
            await pool.acquire("late", timeout=0.3)
        assert "'late'" in str(info.value)
        got: list[str] = []

        async def waiter() -> None:
            slot = await pool.acquire("waiter", timeout=10)
            got.append(slot.slot_id)
            await pool.release(slot)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.2)
            assert got == []
            await pool.release(held)
        assert got == [held.slot_id]


async def test_idle_hosts_scale_down_to_min_hosts(sandbox_root: Path) -> None:
    config = PoolConfig(
        name="idle",
        slots_per_host=2,
        min_hosts=1,
        max_hosts=3,
        idle_timeout=0.3,
        health_interval=0.1,
    )
    async with SandboxPool(_local(sandbox_root), config) as pool:
        assert pool.stats().hosts == 1
        slots = [await pool.acquire(f"t{i}") for i in range(6)]
        assert pool.stats().hosts == 3
        for slot in slots[1:]:
            await pool.release(slot)
        assert await _eventually(lambda: pool.stats().hosts == 1)
        assert pool.stats().slots_busy == 1
        await pool.release(slots[0])
        await anyio.sleep(0.6)
        assert pool.stats().hosts == 1
        assert len(os.listdir(sandbox_root)) == 1


async def test_dead_host_is_replaced(sandbox_root: Path) -> None:
    config = PoolConfig(name="health", slots_per_host=1, min_hosts=1, health_interval=0.1)
    async with SandboxPool(_local(sandbox_root), config) as pool:
        slot = await pool.acquire("t")
        (old,) = os.listdir(sandbox_root)
        # Its owner record gone = dead (the workspace may be a mounted tmpfs: no rmtree).
        await anyio.to_thread.run_sync(os.remove, sandbox_root / old / "owner.json")
        assert await _eventually(
            lambda: os.listdir(sandbox_root) not in ([], [old]) and pool.stats().hosts == 1
        )
        await pool.release(slot)  # its host is gone: releasing is a no-op
        fresh = await pool.acquire("t2", timeout=5)
        assert not fresh.slot_id.startswith(old)
        assert (await fresh.exec("echo alive", timeout=10)).stdout == "alive\n"
        await pool.release(fresh)


async def test_error_inside_the_pool_tears_everything_down(sandbox_root: Path) -> None:
    async def body() -> None:
        async with SandboxPool(_local(sandbox_root), PoolConfig(name="err", min_hosts=2)) as pool:
            await pool.acquire("t")
            assert len(os.listdir(sandbox_root)) == 2
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await body()
    assert os.listdir(sandbox_root) == []


async def test_cancellation_tears_down_hosts_and_processes(
    sandbox_root: Path, leftover_processes: Callable[[str], list[int]]
) -> None:
    # unique: other tests run at the same time
    token = f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}"
    started = anyio.Event()

    async def run() -> None:
        async with SandboxPool(_local(sandbox_root), PoolConfig(name="cancel")) as pool:
            slot = await pool.acquire("t")
            started.set()
            await slot.exec(f"sleep {token}", timeout=60)

    with anyio.move_on_after(10) as outer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            await anyio.sleep(0.3)
            assert leftover_processes(token)
            tg.cancel_scope.cancel()
    assert not outer.cancelled_caught
    assert os.listdir(sandbox_root) == []
    assert leftover_processes(token) == []


async def test_cancelled_acquire_leaves_the_pool_consistent(sandbox_root: Path) -> None:
    config = PoolConfig(name="cacq", slots_per_host=1, max_hosts=1)
    async with SandboxPool(_local(sandbox_root), config) as pool:
        held = await pool.acquire("holder")
        with anyio.move_on_after(0.2):
            await pool.acquire("cancelled")
        await pool.release(held)
        again = await pool.acquire("next", timeout=2)
        assert again.slot_id == held.slot_id
        await pool.release(again)


async def test_orphans_of_a_killed_run_are_swept(sandbox_root: Path) -> None:
    script = textwrap.dedent(
        f"""
        import anyio, sys
        from hermes_sandbox import LocalBackend, LocalConfig, PoolConfig, SandboxPool
        async def main():
            backend = LocalBackend(LocalConfig(root_dir={str(sandbox_root)!r}))
            async with SandboxPool(backend, PoolConfig(name="orphan", min_hosts=2)) as pool:
                slot = await pool.acquire("t")
                await slot.write_file("work.txt", b"x")
                print("ready", flush=True)
                await anyio.sleep(60)
        anyio.run(main)
        """
    )
    child = await anyio.open_process([sys.executable, "-c", script], stderr=None)
    try:
        assert child.stdout is not None
        with anyio.fail_after(30):
            line = await child.stdout.receive()
        assert line.startswith(b"ready")
    finally:
        child.send_signal(signal.SIGKILL)
        with anyio.fail_after(10):
            await child.wait()
        await child.aclose()
    assert len(os.listdir(sandbox_root)) == 2
    backend = _local(sandbox_root)
    # Any pool starting on this root removes a dead run's hosts, whatever its name (issue 24).
    async with SandboxPool(backend, PoolConfig(name="orphan-other", min_hosts=1)) as live:
        assert live.orphans_removed == 2
        assert len(os.listdir(sandbox_root)) == 1
        for name in ("orphan", "orphan-other"):
            async with SandboxPool(backend, PoolConfig(name=name)) as second:
                assert second.orphans_removed == 0  # a live pool's host is never an orphan
        assert len(os.listdir(sandbox_root)) == 1
    assert os.listdir(sandbox_root) == []


class _FailingBackend:
    name = "failing"

    def __init__(self) -> None:
        self.attempts = 0

    async def start_host(self, spec: HostSpec) -> Host:
        self.attempts += 1
        raise OSError("no capacity")

    async def sweep_orphans(self, pool_name: str) -> int:
        return 0


async def test_host_start_failures_surface_quickly() -> None:
    backend = _FailingBackend()
    async with SandboxPool(backend, PoolConfig(name="fail")) as pool:
        with anyio.fail_after(5), pytest.raises(SandboxError, match="no capacity"):
            await pool.acquire("t", timeout=60)
    assert backend.attempts == 1
    with pytest.raises(SandboxError, match="no capacity"):
        async with SandboxPool(backend, PoolConfig(name="fail", min_hosts=1)):
            pass


async def test_a_start_failure_the_caller_gets_is_not_also_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with SandboxPool(_FailingBackend(), PoolConfig(name="fail")) as pool:
        with pytest.raises(SandboxError, match="no capacity"):
            await pool.acquire("t", timeout=60)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_release_twice_and_after_exit(sandbox_root: Path) -> None:
    async with SandboxPool(_local(sandbox_root), PoolConfig(name="twice")) as pool:
        slot = await pool.acquire("t")
        await pool.release(slot)
        with pytest.raises(SandboxError, match="not leased"):
            await pool.release(slot)
        kept = await pool.acquire("t2")
    await pool.release(kept)
    with pytest.raises(SandboxError, match="not running"):
        await pool.acquire("late")


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "bad name"},
        {"name": "a--b"},
        {"slots_per_host": 0},
        {"min_hosts": 3, "max_hosts": 2},
        {"idle_timeout": 0},
    ],
)
def test_config_is_validated(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        PoolConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
async def test_host_start_failures_back_off_and_the_error_names_them(
    sandbox_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24 finding 7: with the disk full the pool retried 2,030 times in 10 s, then said
    'raise max_hosts'. Now it backs off (0.5 s doubling, jittered) and names the failure."""
    disk = sandbox_root / "disk"
    disk.mkdir()
    await anyio.run_process(["mount", "-t", "tmpfs", "-o", "size=4m", "hermes-test", str(disk)])
    try:
        backend = LocalBackend(LocalConfig(root_dir=str(disk / "hosts")))
        config = PoolConfig(name="full", slots_per_host=1, max_hosts=4)
        async with SandboxPool(backend, config) as pool:
            first = await pool.acquire("t0")
            filler = await anyio.run_process(
                ["dd", "if=/dev/zero", f"of={disk}/filler", "bs=64k"], check=False
            )
            assert b"No space left" in filler.stderr
            started = time.monotonic()
            with pytest.raises(SandboxError) as caught:
                await pool.acquire("t1", timeout=3)
            elapsed = time.monotonic() - started
            await pool.release(first)
        failures = [r for r in caplog.records if "starting a host failed" in r.getMessage()]
        assert 2 <= len(failures) <= 5, f"{len(failures)} start attempts in {elapsed:.1f}s"
        message = str(caught.value)
        assert not isinstance(caught.value, AcquireTimeout)
        assert "starting a host failed" in message
        assert "No space left on device" in message
        assert "max_hosts" not in message
    finally:
        await anyio.run_process(["umount", "-l", str(disk)])
        disk.rmdir()
