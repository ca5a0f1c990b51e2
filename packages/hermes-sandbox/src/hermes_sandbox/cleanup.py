"""Find and remove what this user's *dead* pools left behind: ``hermes-sandbox cleanup``.

A pool killed with ``SIGKILL`` (or a crashed machine's reboot that kept ``/tmp``) leaves host
directories, mounted slot tmpfs, cgroups and, in the worst case, processes. Every directory
backend registers its root (:func:`~hermes_sandbox.backends._root_dir.registered_roots`), so a
sweep finds them whatever the pool's name or root: a host is dead when the process recorded in
its ``owner.json`` (pid + start time) is gone. Live pools' hosts, mounts and cgroups are never
touched. A pool sweeps its own root at its start (dead hosts of any pool name); the command
sweeps every registered root and mount, and runs every sweeper of :func:`default_sweepers`.

Container backends add their own :class:`LeftoverSweeper` to :func:`default_sweepers` (docker:
containers of dead pools; gvisor: their sandboxes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Protocol

import anyio
import attrs

from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._root_dir import owned_dir, registered_roots
from hermes_sandbox.backends._workspace_fs import workspace_mounts
from hermes_sandbox.backends.cgroups import host_cgroups, remove_host_cgroups, subtree_for

logger = logging.getLogger(__name__)


@attrs.frozen(slots=True)
class Removed:
    """One leftover a sweep removed (or, in a dry run, would remove)."""

    kind: str
    """``host`` (a directory), ``mount``, ``cgroup``, ``process``, ``container``, or ``skipped``
    (failed)."""
    what: str


class LeftoverSweeper(Protocol):
    """Finds and removes one kind of backend's leftovers of this user's dead pools."""

    @property
    def name(self) -> str: ...

    async def sweep(self, *, dry_run: bool) -> list[Removed]: ...


def _host_of_slot_mount(point: str) -> str | None:
    """``<root>/<host>`` of a slot tmpfs mounted at ``<root>/<host>/slots/<i>``."""
    slots = os.path.dirname(point)
    return os.path.dirname(slots) if os.path.basename(slots) == "slots" else None


def sweep_directories(
    roots: Iterable[str] = (), *, everywhere: bool = False, dry_run: bool = False
) -> list[Removed]:
    """Remove dead hosts under ``roots`` (with their mounts and processes) and their cgroups.

    ``everywhere``: also under every registered root, and wherever a slot tmpfs is mounted.
    Blocking: run it in a worker thread. Failures are reported as ``skipped``, never raised:
    leftovers never stop a start.
    """
    removed: list[Removed] = []
    known: set[str] = set()
    for root in (*roots, *(registered_roots() if everywhere else ())):
        if owned_dir(root):
            known.add(os.path.realpath(root))
        elif os.path.lexists(root):  # never sweep a tree someone else controls
            removed.append(Removed("skipped", f"{root}: not a directory owned by you"))
    dead = {host for root in known for host in _host_dirs.dead_hosts(root)}
    for point in workspace_mounts() if everywhere else ():
        host = _host_of_slot_mount(point)
        mine = host is not None and owned_dir(os.path.dirname(host))
        if host is not None and mine and not _host_dirs.host_alive(host):
            dead.add(host)
    for host_dir in sorted(dead):
        removed += _remove_host(host_dir, dry_run)
    by_subtree = {subtree_for(root): root for root in known}
    for subtree, host_id in sorted(host_cgroups()):
        cgroup_root = by_subtree.get(subtree)
        if cgroup_root is None:  # a root no backend registered: its liveness cannot be told
            logger.info("hermes-sandbox: cleanup keeps %s/%s (unknown root)", subtree, host_id)
            continue
        if _host_dirs.host_alive(os.path.join(cgroup_root, host_id)):
            continue
        try:
            if not dry_run:
                remove_host_cgroups(subtree, host_id)
        except OSError as exc:
            removed.append(Removed("skipped", f"cgroup {subtree}/{host_id}: {exc}"))
            continue
        removed.append(Removed("cgroup", f"{subtree}/{host_id}"))
    return removed


def _remove_host(host_dir: str, dry_run: bool) -> list[Removed]:
    if not os.path.lexists(host_dir):
        return []
    if dry_run:
        return [Removed("host", host_dir)]
    try:
        killed, mounts = _host_dirs.remove_host(host_dir)
    except OSError as exc:
        logger.warning("hermes-sandbox: orphan sweep skipped %s: %s", host_dir, exc)
        return [Removed("skipped", f"{host_dir}: {exc}")]
    return [
        *(Removed("process", str(pid)) for pid in killed),
        *(Removed("mount", point) for point in mounts),
        Removed("host", host_dir),
    ]


def remove_orphaned_host(host_dir: str) -> list[Removed]:
    """Remove the host at ``host_dir`` whose owner is known to be gone (its reaper saw it die,
    :mod:`~hermes_sandbox.backends.host_reaper`): its processes, mounts, directory and cgroups,
    without the liveness check of a sweep (a dead owner not yet reaped still looks alive).
    Failures are reported as ``skipped``, never raised."""
    root, host_id = os.path.split(host_dir)
    removed = _remove_host(host_dir, dry_run=False)
    try:
        remove_host_cgroups(subtree_for(root), host_id)
    except OSError as exc:
        removed.append(Removed("skipped", f"cgroup {subtree_for(root)}/{host_id}: {exc}"))
    return removed


def hosts_removed(removed: Sequence[Removed]) -> int:
    """How many dead hosts a sweep removed (by directory or, when only that was left, cgroup)."""
    names = {os.path.basename(r.what) for r in removed if r.kind in ("host", "cgroup")}
    return len(names)


class DirectorySweeper:
    """The leftovers of the ``bwrap`` and ``local`` backends (and of ``hermes-sandbox serve``)
    under ``roots`` and, with ``everywhere``, every registered root and slot mount."""

    def __init__(self, roots: Sequence[str] = (), *, everywhere: bool = True) -> None:
        self._roots = tuple(roots)
        self._everywhere = everywhere

    @property
    def name(self) -> str:
        return "bwrap/local directories"

    async def sweep(self, *, dry_run: bool) -> list[Removed]:
        return await anyio.to_thread.run_sync(
            lambda: sweep_directories(self._roots, everywhere=self._everywhere, dry_run=dry_run)
        )


def default_sweepers(roots: Sequence[str] = (), runsc: str = "runsc") -> list[LeftoverSweeper]:
    """Every sweeper ``hermes-sandbox cleanup`` runs (``roots``: more directory roots;
    ``runsc``: the gVisor binary that made the sandboxes)."""
    from hermes_sandbox.backends.docker import DockerSweeper  # both import this module
    from hermes_sandbox.backends.gvisor import GvisorSweeper

    return [DirectorySweeper(roots), DockerSweeper(), GvisorSweeper(runsc)]
