"""Per-slot cgroups (v1 ``pids``, ``memory`` and ``cpu`` controllers) where writable.

Each slot gets ``<controller cgroup of this process>/<subtree>/<host_id>/<slot>`` with
``pids.max``, ``memory.limit_in_bytes`` and a CFS quota (``cpu.cfs_quota_us`` per
``cpu.cfs_period_us``) set; its ``cgroup.procs`` is handed to the slot's uid so the wrapper
shell that starts the slot's sandbox (or command) can move itself in first (every process is
then counted, limited and can be killed through the cgroup, even ones that escaped the process
group). Only cgroup v1 controllers are used; on a pure cgroup v2 machine (or without write
access) :func:`slot_cgroup` returns ``None`` and rlimits alone apply.
The subtree name is derived from the backend's ``root_dir`` (:func:`subtree_for`), so runs
with different roots never touch each other's cgroups.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import zlib

CGROUP_FS = "/sys/fs/cgroup"
_CONTROLLERS = ("pids", "memory", "cpu")
CFS_PERIOD_US = 100_000


SUBTREE_PREFIX = "hermes-sandbox-"


def subtree_for(root_dir: str) -> str:
    """The cgroup subtree name of backends whose hosts live under ``root_dir``."""
    return f"{SUBTREE_PREFIX}{zlib.crc32(os.path.realpath(root_dir).encode()):08x}"


def _own_dirs() -> dict[str, str]:
    """``{controller: this process's cgroup directory}`` for the writable v1 controllers."""
    dirs: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller not in _CONTROLLERS:
                continue
            own = os.path.normpath(os.path.join(CGROUP_FS, controller) + path)
            if os.path.isfile(os.path.join(own, "cgroup.procs")) and os.access(own, os.W_OK):
                dirs[controller] = own
    return dirs


def controller_bases(subtree: str) -> dict[str, str]:
    """``{controller: <its cgroup dir of this process>/<subtree>}`` for writable v1 ones."""
    return {controller: os.path.join(own, subtree) for controller, own in _own_dirs().items()}


def host_cgroups() -> set[tuple[str, str]]:
    """``(subtree, host_id)`` of every host cgroup of any hermes-sandbox subtree here."""
    found: set[tuple[str, str]] = set()
    for own in _own_dirs().values():
        for subtree in os.listdir(own):
            base = os.path.join(own, subtree)
            if not subtree.startswith(SUBTREE_PREFIX):
                continue
            try:
                hosts = os.listdir(base)
            except (FileNotFoundError, NotADirectoryError):  # another pool removed it just now
                continue
            found.update((subtree, h) for h in hosts if os.path.isdir(f"{base}/{h}"))
    return found


class SlotCgroup:
    """The cgroup directories of one slot, one per controller."""

    def __init__(self, dirs: dict[str, str]) -> None:
        self.dirs = dirs

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs.values()]

    def kill_all(self) -> int:
        """SIGKILL every process in the slot's cgroups; return how many were signalled."""
        return sum(_kill_cgroup(d) for d in self.dirs.values())

    def remove(self) -> None:
        for directory in self.dirs.values():
            _remove_cgroup(directory)


def _kill_cgroup(directory: str) -> int:
    killed = 0
    with contextlib.suppress(OSError):
        with open(os.path.join(directory, "cgroup.procs"), encoding="ascii") as f:
            pids = [int(x) for x in f.read().split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def _remove_cgroup(directory: str, attempts: int = 50) -> None:
    """Kill what is inside and ``rmdir`` (retrying while the kernel reaps the processes)."""
    for _ in range(attempts):
        if not os.path.isdir(directory):
            return
        _kill_cgroup(directory)
        try:
            os.rmdir(directory)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # called from a worker thread
    os.rmdir(directory)


def _knobs(
    memory_bytes: int | None, max_pids: int | None, cpus: float | None
) -> dict[str, list[tuple[str, int]]]:
    """``{controller: [(file, value), ...]}`` for the limits that are set."""
    knobs: dict[str, list[tuple[str, int]]] = {}
    if memory_bytes is not None:
        knobs["memory"] = [("memory.limit_in_bytes", memory_bytes)]
    if max_pids is not None:
        knobs["pids"] = [("pids.max", max_pids)]
    if cpus is not None:
        quota = max(1000, round(cpus * CFS_PERIOD_US))
        knobs["cpu"] = [("cpu.cfs_period_us", CFS_PERIOD_US), ("cpu.cfs_quota_us", quota)]
    return knobs


def slot_cgroup(
    subtree: str,
    host_id: str,
    index: int,
    *,
    memory_bytes: int | None,
    max_pids: int | None,
    owner: tuple[int, int] | None,
    cpus: float | None = None,
) -> SlotCgroup | None:
    """Create (or reuse) the cgroups of slot ``index``; ``None`` when none can be made."""
    wanted = _knobs(memory_bytes, max_pids, cpus)
    dirs: dict[str, str] = {}
    for controller, base in controller_bases(subtree).items():
        if controller not in wanted:
            continue
        directory = os.path.join(base, host_id, str(index))
        try:
            os.makedirs(directory, exist_ok=True)
            for knob, value in wanted[controller]:
                with open(os.path.join(directory, knob), "w", encoding="ascii") as f:
                    f.write(str(value))
            if owner is not None:
                os.chown(os.path.join(directory, "cgroup.procs"), *owner)
        except OSError:
            with contextlib.suppress(OSError):
                _remove_cgroup(directory, attempts=1)
            continue
        dirs[controller] = directory
    return SlotCgroup(dirs) if dirs else None


def remove_host_cgroups(subtree: str, host_id: str) -> None:
    """Remove every cgroup of ``host_id`` (its slots first, then the host directory)."""
    for base in controller_bases(subtree).values():
        host_dir = os.path.join(base, host_id)
        if not os.path.isdir(host_dir):
            continue
        for name in os.listdir(host_dir):
            path = os.path.join(host_dir, name)
            if os.path.isdir(path):
                _remove_cgroup(path)
        _remove_cgroup(host_dir)
        with contextlib.suppress(OSError):  # busy while other hosts still have cgroups
            os.rmdir(base)
