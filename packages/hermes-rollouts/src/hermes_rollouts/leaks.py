"""What a closed sandbox pool may have left behind: host directories, mounts, containers,
processes. Used by the environment check after its pool has closed.

Each probe looks only at what the pool of that name made (its host directories and mounts are
named after it, its containers are labelled with it) and at processes this process started
since the pool opened, itself or through children it started since (not through a process
that was already running, such as a sandbox server), so other work on the machine never
counts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import attrs
from hermes_sandbox import BwrapBackend, HostBackend, LocalBackend

#: seconds a probe waits for what is still going away (a killed process, a busy unmount)
SETTLE_S = 5.0
_POLL_S = 0.1


@attrs.frozen(slots=True)
class Snapshot:
    """What existed before the pool opened: this process's live descendants."""

    descendants: frozenset[int]

    @classmethod
    def take(cls) -> Snapshot:
        return cls(frozenset(_descendants()))


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (non-zombie) process."""
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def _descendants(old: frozenset[int] = frozenset()) -> set[int]:
    """Live descendants of this process, not looking below the processes in ``old``."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    stack = [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                if child not in old:
                    stack.append(child)
    return found


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:120] or "?"


def _host_dirs(backend: HostBackend, pool_name: str) -> list[str]:
    if not isinstance(backend, BwrapBackend | LocalBackend):
        return []
    root = Path(backend.config.root_dir)
    if not root.is_dir():
        return []
    return sorted(str(p) for p in root.iterdir() if p.name.startswith(f"{pool_name}--"))


def _mounts(pool_name: str) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        points = [line.split()[4] for line in f]
    return sorted(p for p in points if f"/{pool_name}--" in p)


async def _containers(backend: HostBackend, pool_name: str) -> list[str]:
    if backend.name != "docker" or shutil.which("docker") is None:
        return []
    from hermes_sandbox.backends.docker import POOL_LABEL

    filter_ = f"label={POOL_LABEL}={pool_name}"
    with anyio.fail_after(60):
        done = await anyio.run_process(["docker", "ps", "-aq", "--filter", filter_], check=False)
    return [f"container {c}" for c in done.stdout.decode().split()]


async def leftovers(backend: HostBackend, pool_name: str, before: Snapshot) -> list[str]:
    """Everything the closed pool ``pool_name`` left: host directories, mounts, containers,
    and processes started since ``before`` (each probe retried for up to :data:`SETTLE_S`)."""
    deadline = anyio.current_time() + SETTLE_S
    while True:
        processes = sorted(_descendants(before.descendants) - before.descendants)
        found = [
            *_host_dirs(backend, pool_name),
            *_mounts(pool_name),
            *await _containers(backend, pool_name),
            *(f"process {pid}: {_command(pid)}" for pid in processes),
        ]
        if not found or anyio.current_time() > deadline:
            return found
        await anyio.sleep(_POLL_S)
