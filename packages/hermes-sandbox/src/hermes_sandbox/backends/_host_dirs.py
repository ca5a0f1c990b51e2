"""On-disk layout of directory-based hosts (local, bwrap): creation, ownership, orphan sweep.

``<root>/<host_id>/owner.json`` records the process that owns the host (pid + start time), so
an orphan sweep removes hosts of *dead* runs of the same pool and never a live pool's hosts.
``<root>/<host_id>/slots/<i>`` are the slot directories (a size-limited tmpfs where hermes may
mount), each holding ``workspace`` and, for bwrap, the slot's ``tmp`` and ``shm``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Sequence

from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._workspace_fs import mount_workspace, unmount_beneath

logger = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
HOST_ID_SEPARATOR = "--"
SLOT_MARKER_VAR = "HERMES_SANDBOX_SLOT"


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


def write_owner(host_dir: str) -> None:
    pid = os.getpid()
    with open(os.path.join(host_dir, OWNER_FILE), "w", encoding="utf-8") as f:
        json.dump({"pid": pid, "start_time": _start_time(pid)}, f)


def owner_alive(host_dir: str) -> bool:
    try:
        with open(os.path.join(host_dir, OWNER_FILE), encoding="utf-8") as f:
            owner = json.load(f)
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    recorded = owner.get("start_time")
    return recorded is not None and _start_time(pid) == recorded


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


def can_mount_workspaces(scratch: str) -> bool:
    """Whether size-limited workspaces can be mounted here (tried on ``scratch``, then gone)."""
    try:
        return empty_dir(scratch, None, 1 << 20)
    finally:
        unmount_beneath(scratch)
        remove_tree(scratch)


def kill_marked(marker: str) -> int:
    """SIGKILL every process whose environment has ``HERMES_SANDBOX_SLOT`` starting ``marker``."""
    needle = f"{SLOT_MARKER_VAR}={marker}".encode()
    killed = 0
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
                killed += 1
    return killed


def sweep(root: str, pool_name: str) -> int:
    """Remove hosts of ``pool_name`` under ``root`` whose owning process is gone.

    An entry that cannot be removed is logged and skipped: a previous run's leftovers never
    stop a pool (or a sandbox server) from starting.
    """
    if not os.path.isdir(root):
        return 0
    removed = 0
    for name in sorted(os.listdir(root)):
        host_dir = os.path.join(root, name)
        if name.startswith(".") or pool_of(name) != pool_name:
            continue
        try:
            if not os.path.isdir(host_dir) or owner_alive(host_dir):
                continue
            kill_marked(name + "/")
            unmount_beneath(host_dir)
            remove_tree(host_dir)
        except OSError as exc:
            logger.warning("hermes-sandbox: orphan sweep skipped %s: %s", host_dir, exc)
            continue
        removed += 1
    return removed
