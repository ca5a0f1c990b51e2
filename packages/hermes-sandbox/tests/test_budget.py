"""Issue 24 finding 8, the arithmetic: slot limits are fitted to the machine's budget (the
pool's cgroups, CPU quota and /dev/shm: test_bwrap_hardening.py)."""

from __future__ import annotations

import os

import pytest
from hermes_protocols import ConfigError
from hermes_sandbox import PoolConfig, ResourceLimits
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
