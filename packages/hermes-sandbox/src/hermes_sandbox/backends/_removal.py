"""Remove a directory tree that a hostile slot built: no recursion, no path length limit.

A slot can make trees thousands of levels deep (``shutil.rmtree`` then hits ``RecursionError``
and paths longer than ``PATH_MAX``), directories without read/write/search permission, and
symlinks pointing anywhere. :func:`remove_tree` walks with directory descriptors (every name is
one component, opened ``O_NOFOLLOW``; going up is ``..`` of the current descriptor), keeps
only a list of pending names per level, and restores owner permissions on directories it
cannot enter or empty. Symlinks are unlinked, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent_fd: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        # A directory the slot made unreadable (mode 000): the owner may chmod it back.
        if not stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=parent_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory entry of directory ``fd``; return its subdirectory names."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, stat.S_IRWXU)  # removing entries needs write+search on the directory
    subdirs: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def _remove_dir(parent_fd: int, name: str) -> None:
    fd = _open_dir(name, parent_fd)
    stack: list[tuple[str, list[str]]] = [(name, _clear_files(fd))]
    try:
        while stack:
            pending = stack[-1][1]
            if pending:
                child = pending.pop()
                try:
                    child_fd = _open_dir(child, fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    os.unlink(child, dir_fd=fd)  # replaced by a file or symlink meanwhile
                    continue
                os.close(fd)
                fd = child_fd
                stack.append((child, _clear_files(fd)))
                continue
            done, _ = stack.pop()
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = up
            if stack:
                os.rmdir(done, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def remove_tree(path: str) -> None:
    """Remove ``path`` (a file, symlink or directory tree of any depth); missing is fine.

    Raises ``OSError`` naming ``path`` when something cannot be removed (e.g. a mount point).
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    parent, name = os.path.split(os.path.abspath(path))
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(info.st_mode):
            _remove_dir(parent_fd, name)
        else:
            os.unlink(name, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise OSError(exc.errno, f"cannot remove {path!r}: {exc.strerror}") from exc
    finally:
        os.close(parent_fd)
