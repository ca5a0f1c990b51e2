"""Issue 24 finding 8: slot limits fit the machine; CPU limits; /tmp and /dev/shm inside the
disk limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hermes_protocols import ConfigError
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, ResourceLimits, SandboxPool
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for
from hermes_sandbox.budget import MachineBudget, fit_limits, machine_memory

GIB = 1 << 30


def test_default_limits_of_a_default_pool_are_clamped_to_the_machine() -> None:
    config = PoolConfig()
    slots = config.max_hosts * config.slots_per_host
    budget = MachineBudget(memory_bytes=24 * GIB, cpus=2)
    assert ResourceLimits().slot_memory_bytes * slots == 256 * GIB  # type: ignore[operator]
    fitted, notes = fit_limits(ResourceLimits(), budget, slots, disk_in_memory=True)
    assert fitted.slot_memory_bytes is not None
    assert fitted.slot_memory_bytes * slots <= 24 * GIB
    assert fitted.disk_bytes == fitted.slot_memory_bytes  # 2 GiB tmpfs x 32 > 24 GiB too
    assert fitted.slot_cpus == 1.0  # within the machine's 2 CPUs: unchanged
    assert any("slot_memory_bytes 8.00 GiB -> 0.75 GiB" in note for note in notes)


def test_limits_that_fit_are_kept_and_cpus_are_capped_at_the_machine() -> None:
    limits = ResourceLimits(slot_memory_bytes=GIB, disk_bytes=GIB, slot_cpus=8)
    fitted, notes = fit_limits(limits, MachineBudget(16 * GIB, cpus=2), 4, disk_in_memory=False)
    assert (fitted.slot_memory_bytes, fitted.disk_bytes, fitted.slot_cpus) == (GIB, GIB, 2.0)
    assert notes == ["slot_cpus 8 -> 2 (the machine's CPUs)"]
    unlimited = ResourceLimits(slot_memory_bytes=None)
    fitted, _ = fit_limits(unlimited, MachineBudget(16 * GIB), 4, disk_in_memory=False)
    assert fitted.slot_memory_bytes == 4 * GIB


def test_too_many_slots_for_the_budget_are_refused_naming_the_options() -> None:
    with pytest.raises(ConfigError, match="lower max_hosts or slots_per_host"):
        fit_limits(ResourceLimits(), MachineBudget(memory_bytes=GIB), 64, disk_in_memory=True)
    with pytest.raises(ConfigError):
        MachineBudget(cpus=0)
    with pytest.raises(ConfigError):
        ResourceLimits(slot_cpus=-1)


def test_machine_memory_is_what_this_machine_has() -> None:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < machine_memory() <= total


def _knob(root: Path, controller: str, slot_id: str, name: str) -> str:
    """A file of the cgroup of ``slot_id`` (``<host_id>/<index>``)."""
    base = controller_bases(subtree_for(str(root)))[controller]
    return Path(base, slot_id, name).read_text().strip()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_pool_sets_slot_cgroups_within_its_budget_and_cpu_quota_binds(
    sandbox_root: Path,
) -> None:
    bases = controller_bases(subtree_for(str(sandbox_root)))
    if not {"memory", "cpu"} <= set(bases):
        pytest.skip("cgroup v1 memory and cpu controllers are not writable here")
    backend = BwrapBackend(
        BwrapConfig(root_dir=str(sandbox_root), limits=ResourceLimits(slot_cpus=0.05))
    )
    config = PoolConfig(name="budget", slots_per_host=4, max_hosts=8)
    async with SandboxPool(backend, config) as pool:
        slot = await pool.acquire("t")
        limit = int(_knob(sandbox_root, "memory", slot.slot_id, "memory.limit_in_bytes"))
        assert limit * 32 <= machine_memory()
        assert _knob(sandbox_root, "cpu", slot.slot_id, "cpu.cfs_quota_us") == "5000"
        # Four burners want 4 CPUs; the slot gets 0.05 (even on a loaded machine, that binds).
        burn = await slot.exec(
            "TIMEFORMAT=%U; time (for i in 1 2 3 4; do timeout 1.5 bash -c 'while :; do :; done' "
            "& done; wait)",
            timeout=30,
        )
        assert float(burn.stderr.strip()) <= 0.05 * 1.5 * 3  # ~0.08 s of CPU, not up to 6 s
        lines = _knob(sandbox_root, "cpu", slot.slot_id, "cpu.stat").splitlines()
        stat = dict(line.split() for line in lines)
        assert int(stat["nr_throttled"]) > 0  # the kernel held the slot to its quota
        await pool.release(slot)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(os.geteuid() != 0, reason="size-limited slots are mounted as root only")
async def test_tmp_and_dev_shm_count_against_the_disk_limit(sandbox_root: Path) -> None:
    limits = ResourceLimits(disk_bytes=64 << 20)
    backend = BwrapBackend(BwrapConfig(root_dir=str(sandbox_root), limits=limits))
    async with SandboxPool(backend, PoolConfig(name="shm", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        dd = "dd if=/dev/zero bs=1M status=none"
        shm = await slot.exec(f"{dd} of=/dev/shm/big count=300", timeout=60)
        assert "No space left on device" in shm.stderr
        dev = await slot.exec(f"{dd} of=/dev/big count=10", timeout=60)
        assert "Read-only file system" in dev.stderr
        await slot.exec("rm -f /dev/shm/big", timeout=30)
        split = await slot.exec(f"{dd} of=a count=40 && {dd} of=/tmp/b count=40", timeout=60)
        assert "No space left on device" in split.stderr  # one limit for all of them
        await pool.release(slot)
