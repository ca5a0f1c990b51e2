"""Size-limited slot workspaces: a tmpfs mounted on each workspace directory where allowed.

Mounting needs ``CAP_SYS_ADMIN`` (hermes running as root); elsewhere :func:`mount_workspace`
returns ``False`` and the workspace is a plain directory (no kernel-enforced size). Mounts are
detached (``MNT_DETACH``) before a workspace or host directory is removed, including by the
orphan sweep, so nothing stays mounted after a reset, a close or a killed run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

import anyio
import attrs
from hermes_protocols import ExecResult

_MNT_DETACH = 2
_MS_NOSUID = 2
_MS_NODEV = 4
_FULL_BELOW_BYTES = 1 << 20


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_workspace(path: str, size_bytes: int, owner: tuple[int, int] | None) -> bool:
    """Mount a ``size_bytes`` tmpfs on ``path`` (mode 0700, owned by ``owner`` or us).

    Returns ``False`` when this process may not mount; raises ``OSError`` on other failures.
    """
    uid, gid = owner if owner is not None else (os.geteuid(), os.getegid())
    options = f"size={size_bytes},mode=0700,uid={uid},gid={gid}".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc().mount(MOUNT_SOURCE.encode(), os.fsencode(path), b"tmpfs", flags, options) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EPERM, errno.EACCES):
        return False
    raise OSError(err, f"cannot mount the workspace tmpfs: {os.strerror(err)}", path)


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")


MOUNT_SOURCE = "hermes-ws"
"""The source name of every slot tmpfs hermes mounts (how a sweep recognizes them)."""


def _mountinfo() -> list[list[str]]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            return [line.split() for line in f]
    except OSError:
        return []


def workspace_mounts() -> list[str]:
    """Mount points of every slot tmpfs hermes mounted (any root, any user's)."""
    points = []
    for fields in _mountinfo():
        rest = fields[fields.index("-") + 1 :] if "-" in fields else []
        if rest[:2] == ["tmpfs", MOUNT_SOURCE]:
            points.append(_unescape(fields[4]))
    return points


def mounts_beneath(path: str) -> list[str]:
    """Mount points at or below ``path``, deepest first."""
    top = os.path.realpath(path)
    points = [_unescape(fields[4]) for fields in _mountinfo()]
    inside = [p for p in points if p == top or p.startswith(top.rstrip("/") + "/")]
    return sorted(set(inside), key=len, reverse=True)


def unmount_beneath(path: str) -> None:
    """Detach every mount at or below ``path`` (a no-op when there is none)."""
    libc = None
    for point in mounts_beneath(path):
        libc = libc or _libc()
        if libc.umount2(os.fsencode(point), _MNT_DETACH) != 0:
            err = ctypes.get_errno()
            if err not in (errno.EINVAL, errno.ENOENT):
                raise OSError(err, f"cannot unmount: {os.strerror(err)}", point)


async def note_if_full(result: ExecResult, path: str, size_bytes: int | None) -> ExecResult:
    """``result`` with :func:`full_note` appended to stderr when a failed command filled it."""
    if result.exit_code == 0 or size_bytes is None:
        return result
    note = await anyio.to_thread.run_sync(full_note, path, size_bytes)
    if note is None:
        return result
    return attrs.evolve(result, stderr=f"{result.stderr.rstrip()}\n{note}\n".lstrip())


def full_note(path: str, size_bytes: int | None) -> str | None:
    """A line telling the model the workspace is full, when its filesystem is (else None)."""
    if size_bytes is None:
        return None
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    if info.f_bavail * info.f_frsize >= _FULL_BELOW_BYTES or not mounts_beneath(path):
        return None
    return (
        f"hermes-sandbox: the slot's disk limit ({size_bytes / (1 << 30):.1f} GiB for the "
        "workspace, the same for /tmp) is used up; delete files to free space"
    )
