"""What all slots of a pool may use together on this machine, and fitting slot limits to it.

A slot's memory limit is a promise the machine must be able to keep for every slot at once:
default limits (8 GiB per slot) of 8 hosts x 4 slots add up to 256 GiB, which a 24 GiB
machine cannot hold, so a few slots could take the machine down before any of them hit its
own limit. :func:`fit_limits` clamps the per-slot memory limit (and the disk limit, whose
tmpfs lives in memory) to ``budget / slots`` and each slot's CPU quota to the machine's CPUs.
CPU is not summed: quotas time-share, so many slots with one CPU each is fine.
"""

from __future__ import annotations

import os

import attrs
from hermes_protocols import ConfigError

from hermes_sandbox.limits import ResourceLimits

MIN_SLOT_MEMORY = 128 << 20
"""Below this per-slot share the pool refuses to start (commands could hardly run)."""

_UNLIMITED_CGROUP = 1 << 62


@attrs.frozen(slots=True)
class MachineBudget:
    """What all slots of one pool may use together (``None`` = what this machine has:
    its memory, or this process's cgroup memory limit when lower; the CPUs it may run on)."""

    memory_bytes: int | None = None
    cpus: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.memory_bytes is not None and self.memory_bytes <= 0:
            raise ConfigError("MachineBudget.memory_bytes must be positive")
        if self.cpus is not None and self.cpus <= 0:
            raise ConfigError("MachineBudget.cpus must be positive")


def _own_cgroup_memory_limit() -> int | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            candidates = [f"/sys/fs/cgroup{path}/memory.max"]
        elif "memory" in controllers.split(","):
            candidates = [f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"]
        else:
            continue
        for candidate in candidates:
            try:
                with open(os.path.normpath(candidate), encoding="ascii") as f:
                    raw = f.read().strip()
            except OSError:
                continue
            if raw.isdigit() and int(raw) < _UNLIMITED_CGROUP:
                return int(raw)
    return None


def machine_memory() -> int:
    """This machine's memory, or this process's cgroup memory limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = _own_cgroup_memory_limit()
    return min(total, limit) if limit is not None else total


def machine_cpus() -> float:
    """The CPUs this process may run on."""
    return float(len(os.sched_getaffinity(0)))


def _gib(value: int) -> str:
    return f"{value / (1 << 30):.2f} GiB"


def fit_limits(
    limits: ResourceLimits, budget: MachineBudget, slots: int, *, disk_in_memory: bool
) -> tuple[ResourceLimits, list[str]]:
    """``limits`` clamped so ``slots`` slots fit ``budget``, and what was changed (one line
    each). ``disk_in_memory``: the disk limit is a tmpfs size (counted like memory).

    Raises :class:`ConfigError` when each slot would get less than :data:`MIN_SLOT_MEMORY`.
    """
    memory = budget.memory_bytes if budget.memory_bytes is not None else machine_memory()
    share = memory // slots
    if share < MIN_SLOT_MEMORY:
        raise ConfigError(
            f"{slots} slots cannot share {_gib(memory)} of memory ({_gib(share)} each, at least "
            f"{_gib(MIN_SLOT_MEMORY)} needed); lower max_hosts or slots_per_host, or raise "
            "PoolConfig.budget.memory_bytes"
        )
    cpus = budget.cpus if budget.cpus is not None else machine_cpus()
    notes: list[str] = []
    slot_memory, disk, slot_cpus = limits.slot_memory_bytes, limits.disk_bytes, limits.slot_cpus
    if slot_memory is None or slot_memory > share:
        was = "unlimited" if slot_memory is None else _gib(slot_memory)
        notes.append(f"slot_memory_bytes {was} -> {_gib(share)} ({slots} slots in {_gib(memory)})")
        slot_memory = share
    if disk_in_memory and disk is not None and disk > share:
        notes.append(f"disk_bytes {_gib(disk)} -> {_gib(share)} (a tmpfs in memory)")
        disk = share
    if slot_cpus is not None and slot_cpus > cpus:
        notes.append(f"slot_cpus {slot_cpus:g} -> {cpus:g} (the machine's CPUs)")
        slot_cpus = cpus
    fitted = attrs.evolve(
        limits, slot_memory_bytes=slot_memory, disk_bytes=disk, slot_cpus=slot_cpus
    )
    return fitted, notes
