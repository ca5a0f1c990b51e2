"""On-disk layout of directory-based hosts (local, bwrap): creation, ownership, orphan sweep.

``<root>/<host_id>/owner.json`` records the process that owns the host (pid + start time), so
an orphan sweep removes hosts of *dead* runs of the same pool and never a live pool's hosts.
``<root>/<host_id>/slots/<i>`` are the slot workspaces.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal

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


def owner_alive(host_dir: str) -> bool:
    try:
        with open(os.path.join(host_dir, OWNER_FILE), encoding="utf-8") as f:
            owner = json.load(f)
        return token_alive(f"{int(owner['pid'])}:{owner.get('start_time')}")
    except (OSError, ValueError, KeyError, TypeError):
        return False


def empty_dir(path: str, owner: tuple[int, int] | None, size_bytes: int | None = None) -> bool:
    """Make ``path`` an empty directory owned by ``owner`` (recreated from scratch).

    With ``size_bytes`` a tmpfs of that size is mounted on it where this process may mount;
    returns whether it was.
    """
    unmount_beneath(path)
    remove_tree(path)
    os.makedirs(path, mode=0o700)
    if owner is not None:
        os.chown(path, *owner)
    return size_bytes is not None and mount_workspace(path, size_bytes, owner)


def clear_dir(path: str, owner: tuple[int, int] | None) -> None:
    """Empty ``path`` in place (it stays the same directory or mount point, e.g. one a
    container binds): every entry removed, mode 0700, owned by ``owner``, no user xattrs."""
    os.chmod(path, 0o700)
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
