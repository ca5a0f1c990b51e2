"""On-disk layout of directory-based hosts (local, bwrap): creation, ownership, dead hosts.

``<root>/<host_id>/owner.json`` records the process that owns the host (pid + start time), so
a sweep removes hosts of *dead* runs (any pool name) and never a live pool's hosts.
``<root>/<host_id>/slots/<i>`` are the slot directories (a size-limited tmpfs where hermes may
mount), each holding ``workspace`` and, for bwrap, the slot's ``tmp`` and ``shm``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
import zlib
from collections.abc import Sequence

from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._workspace_fs import mount_workspace, mounts_beneath, unmount_beneath

logger = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
HOST_ID_SEPARATOR = "--"
SLOT_MARKER_VAR = "HERMES_SANDBOX_SLOT"


SLOT_UID_RANGE = (200_000, 265_000)
"""The default range of host uids slots run as when hermes runs as root."""


def slot_owner(slot_id: str, uid_range: tuple[int, int]) -> tuple[int, int]:
    """The (uid, gid) slot ``slot_id`` runs as: a hash of it into ``uid_range``."""
    lo, hi = uid_range
    if not 0 < lo < hi:
        raise ValueError(f"uid_range must be (low, high) with 0 < low < high, got {lo, hi}")
    uid = lo + zlib.crc32(slot_id.encode()) % (hi - lo)
    return uid, uid


def pool_of(host_id: str) -> str:
    """The pool name a host id was made for (``<pool>--<suffix>``)."""
    return host_id.rsplit(HOST_ID_SEPARATOR, 1)[0]


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None


def owner_token() -> str:
    """This process as ``<pid>:<start time>``: what hosts and containers record as owner."""
    pid = os.getpid()
    return f"{pid}:{_start_time(pid)}"


def token_alive(token: str) -> bool:
    """Whether the process an :func:`owner_token` names still runs (pid reuse is detected)."""
    pid, _, recorded = token.partition(":")
    if not pid.isdigit() or recorded in ("", "None"):
        return False
    return _start_time(int(pid)) == recorded


def write_owner(host_dir: str) -> None:
    pid, _, start = owner_token().partition(":")
    with open(os.path.join(host_dir, OWNER_FILE), "w", encoding="utf-8") as f:
        json.dump({"pid": int(pid), "start_time": start}, f)


CREATION_GRACE_S = 60.0
"""A host directory without an owner file yet is being created for this long."""


def owner_alive(host_dir: str) -> bool:
    try:
        with open(os.path.join(host_dir, OWNER_FILE), encoding="utf-8") as f:
            owner = json.load(f)
        return token_alive(f"{int(owner['pid'])}:{owner.get('start_time')}")
    except (OSError, ValueError, KeyError, TypeError):
        return False


WORKSPACE_DIR = "workspace"
SCRATCH_DIRS = ("tmp", "shm")
"""Inside a slot directory: the workspace, and (bwrap) the slot's ``/tmp`` and ``/dev/shm``."""


def slot_subdirs(scratch: bool) -> list[tuple[str, int]]:
    """``(name, mode)`` of what a slot directory holds: the workspace (0700), and with
    ``scratch`` the world-writable sticky ``tmp`` and ``shm``."""
    return [(WORKSPACE_DIR, 0o700), *((name, 0o1777) for name in SCRATCH_DIRS if scratch)]


def empty_dir(
    path: str,
    owner: tuple[int, int] | None,
    size_bytes: int | None = None,
    subdirs: Sequence[tuple[str, int]] = (),
) -> bool:
    """Make ``path`` an empty directory owned by ``owner`` (recreated from scratch), holding
    the empty ``subdirs`` ``(name, mode)``.

    With ``size_bytes`` a tmpfs of that size is mounted on it where this process may mount
    (so everything in it, subdirectories included, shares that size); returns whether it was.
    """
    unmount_beneath(path)
    remove_tree(path)
    os.makedirs(path, mode=0o700)
    if owner is not None:
        os.chown(path, *owner)
    mounted = size_bytes is not None and mount_workspace(path, size_bytes, owner)
    for name, mode in subdirs:
        sub = os.path.join(path, name)
        os.mkdir(sub)
        os.chmod(sub, mode)
        if owner is not None:
            os.chown(sub, *owner)
    return mounted


def clear_dir(path: str, owner: tuple[int, int] | None, mode: int) -> None:
    """Empty ``path`` in place (it stays the same directory, e.g. one a container binds):
    every entry removed, ``mode``, owned by ``owner``, no extended attributes."""
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, *owner)
    for name in os.listxattr(path):
        with contextlib.suppress(OSError):
            os.removexattr(path, name)
    for name in os.listdir(path):
        remove_tree(os.path.join(path, name))


def can_mount_workspaces(scratch: str) -> bool:
    """Whether size-limited workspaces can be mounted here (tried on ``scratch``, then gone)."""
    try:
        return empty_dir(scratch, None, 1 << 20)
    finally:
        unmount_beneath(scratch)
        remove_tree(scratch)


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every process whose environment has ``HERMES_SANDBOX_SLOT`` starting ``marker``;
    the pids signalled."""
    needle = f"{SLOT_MARKER_VAR}={marker}".encode()
    killed: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if any(entry.startswith(needle) for entry in env.split(b"\0")):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(name), signal.SIGKILL)
                killed.append(int(name))
    return killed


def host_alive(host_dir: str) -> bool:
    """Whether ``host_dir`` belongs to a running process, or is still being created."""
    if owner_alive(host_dir):
        return True
    try:
        if os.path.lexists(os.path.join(host_dir, OWNER_FILE)):
            return False
        return time.time() - os.lstat(host_dir).st_mtime < CREATION_GRACE_S
    except OSError:
        return False


def dead_hosts(root: str) -> list[str]:
    """Host directories under ``root`` whose owning process is gone (any pool)."""
    if not os.path.isdir(root):
        return []
    paths = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name[:1] != "."]
    return [path for path in paths if os.path.isdir(path) and not host_alive(path)]


def remove_host(host_dir: str) -> tuple[list[int], list[str]]:
    """Kill what still runs of a dead host, detach its mounts, remove its directory; the pids
    killed and the mount points detached. Raises ``OSError`` when something cannot go."""
    killed = kill_marked(os.path.basename(host_dir) + "/")
    mounts = mounts_beneath(host_dir)
    unmount_beneath(host_dir)
    remove_tree(host_dir)
    return killed, mounts
