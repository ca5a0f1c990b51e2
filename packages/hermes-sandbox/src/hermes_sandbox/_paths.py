"""Confine slot paths to a workspace directory on the host, symlinks included.

A slot path is relative to the workspace or absolute under the workspace as the slot sees it.
Resolution rejects ``..`` and symlinks that leave the workspace; files are then opened by
walking the resolved path component by component with ``O_NOFOLLOW`` from a descriptor of the
workspace, so a symlink swapped in between the check and the open fails instead of escaping.
"""

from __future__ import annotations

import os
import posixpath
import stat

from hermes_protocols import WorkspaceEscape


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def relative_slot_path(path: str, inner_root: str) -> str:
    """``path`` as a normalized path relative to the workspace; raises on ``..`` escapes."""
    if not path:
        raise WorkspaceEscape("empty path")
    if "\x00" in path:
        raise WorkspaceEscape(f"path contains a NUL byte: {path!r}")
    if posixpath.isabs(path):
        norm = posixpath.normpath(path)
        if not _within(norm, inner_root):
            raise WorkspaceEscape(f"{path!r} is outside the workspace {inner_root!r}")
        rel = posixpath.relpath(norm, inner_root)
    else:
        rel = posixpath.normpath(path)
    if rel == ".." or rel.startswith("../"):
        raise WorkspaceEscape(f"{path!r} leaves the workspace {inner_root!r}")
    return rel


def resolve_host_path(host_root: str, path: str, inner_root: str) -> str:
    """The host path for slot path ``path``, following symlinks; raises when it escapes."""
    rel = relative_slot_path(path, inner_root)
    root = os.path.realpath(host_root)
    real = os.path.realpath(os.path.join(root, rel))
    if not _within(real, root):
        raise WorkspaceEscape(f"{path!r} resolves outside the workspace (symlink)")
    return real


def _components(host_root: str, real: str) -> list[str]:
    rel = os.path.relpath(real, os.path.realpath(host_root))
    return [] if rel == "." else rel.split("/")


def open_beneath(
    host_root: str,
    path: str,
    inner_root: str,
    flags: int,
    *,
    mode: int = 0o644,
    make_parents: bool = False,
    owner: tuple[int, int] | None = None,
) -> int:
    """Open slot path ``path`` without following any symlink at open time; return an fd.

    With ``make_parents`` missing directories are created (owned by ``owner`` when given).
    Errors name ``path`` as asked (never only the component that failed).
    """
    try:
        return _open_beneath(
            host_root, path, inner_root, flags, mode=mode, make_parents=make_parents, owner=owner
        )
    except WorkspaceEscape:
        raise
    except OSError as exc:
        if exc.errno is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, path) from exc


def _open_beneath(
    host_root: str,
    path: str,
    inner_root: str,
    flags: int,
    *,
    mode: int = 0o644,
    make_parents: bool = False,
    owner: tuple[int, int] | None = None,
) -> int:
    real = resolve_host_path(host_root, path, inner_root)
    parts = _components(host_root, real)
    if not parts:
        raise IsADirectoryError(f"{path!r} is the workspace directory")
    dir_fd = os.open(os.path.realpath(host_root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                next_fd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
                )
            except FileNotFoundError:
                if not make_parents:
                    raise
                os.mkdir(name, 0o755, dir_fd=dir_fd)
                if owner is not None:
                    os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
                next_fd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
                )
            except OSError as exc:
                raise WorkspaceEscape(f"{path!r} changed while being opened: {exc}") from exc
            os.close(dir_fd)
            dir_fd = next_fd
        try:
            fd = os.open(
                parts[-1],
                flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                mode,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: the last component became a symlink
                raise WorkspaceEscape(f"{path!r} is a symlink swapped in during open") from exc
            raise
        if owner is not None and flags & os.O_CREAT:
            os.fchown(fd, *owner)
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            os.close(fd)
            raise IsADirectoryError(f"{path!r} is a directory")
        if not stat.S_ISREG(kind):
            os.close(fd)
            raise OSError(f"{path!r} is not a regular file")
        os.set_blocking(fd, True)
        return fd
    finally:
        os.close(dir_fd)
