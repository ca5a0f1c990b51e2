"""A host that is a directory tree on this machine, with one workspace directory per slot.

Shared by the ``local`` and ``bwrap`` backends; they differ only in how a slot runs commands.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Protocol

import anyio
from hermes_protocols import SandboxError, Slot

from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._workspace_fs import unmount_beneath
from hermes_sandbox.backends.base import HostSpec

logger = logging.getLogger(__name__)


def workspaces_mountable(root: str, disk_bytes: int | None) -> bool:
    """Whether size-limited slot directories can be mounted under ``root`` (else a warning
    says what is not enforced, when a disk limit is set). Call in a worker thread."""
    probe = f".mount-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # unique: pools start at once
    if _host_dirs.can_mount_workspaces(os.path.join(root, probe)):
        return True
    if disk_bytes is not None:
        logger.warning(
            "hermes-sandbox: the per-slot disk limit is NOT enforced on workspaces under %s "
            "(this process may not mount a tmpfs; run as root for it); only per-file "
            "RLIMIT_FSIZE and bwrap's size-limited /tmp and /dev/shm apply",
            root,
        )
    return False


class DirectorySlot(Slot, Protocol):
    """What a directory host needs from its slots (besides :class:`hermes_protocols.Slot`)."""

    async def stop(self) -> None:
        """Stop the slot's command executor, if it runs one (its commands die with it)."""
        ...

    def kill_all(self) -> None:
        """Kill every process the slot started (sync; called from a worker thread)."""
        ...


SlotFactory = Callable[[str, int, str], DirectorySlot]
"""Builds slot ``index`` of host ``host_id`` whose slot directory is the host path given (the
workspace is its ``workspace`` subdirectory)."""


class DirectoryHost:
    """Slot directories under ``<root>/<host_id>/slots/<i>``; removed entirely on close.

    Each holds the slot's ``workspace`` and, with ``scratch``, its ``tmp`` and ``shm`` (bound
    at ``/tmp`` and ``/dev/shm`` by bwrap), all inside one size-limited tmpfs where hermes may
    mount one.

    The worker threads that make, reset and remove the directories take turns, and none makes
    anything once the host is removed: a caller cancelled with ``Task.cancel()`` (which cuts
    through AnyIO's shields) abandons its thread mid-reset, and that thread must not mount a
    slot again under a host its close has just removed."""

    def __init__(
        self,
        spec: HostSpec,
        root: str,
        make_slot: SlotFactory,
        owner_of: Callable[[int], tuple[int, int] | None],
        on_remove: Callable[[], None] | None = None,
        workspace_bytes: int | None = None,
        scratch: bool = False,
    ) -> None:
        self._spec = spec
        self._subdirs = _host_dirs.slot_subdirs(scratch)
        self._workspace_bytes = workspace_bytes
        self._dir = os.path.join(root, spec.host_id)
        self._owner_of = owner_of
        self._make_slot = make_slot
        self._on_remove = on_remove
        self._closed = False
        self._slots: list[DirectorySlot] = []
        self._disk = threading.Lock()
        self._removed = False

    @classmethod
    async def create(
        cls,
        spec: HostSpec,
        root: str,
        make_slot: SlotFactory,
        owner_of: Callable[[int], tuple[int, int] | None],
        on_remove: Callable[[], None] | None = None,
        workspace_bytes: int | None = None,
        scratch: bool = False,
    ) -> DirectoryHost:
        """Create the directories and the slots (the slot factory runs in a worker thread).

        ``workspace_bytes``: mount a tmpfs of that size on every slot directory (needs root).
        ``scratch``: give every slot its ``tmp`` and ``shm`` directories too.
        """
        host = cls(spec, root, make_slot, owner_of, on_remove, workspace_bytes, scratch)
        try:
            await anyio.to_thread.run_sync(host._create_dirs, root)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await host.close()
            raise
        return host

    def _create_dirs(self, root: str) -> None:
        with self._disk:
            if self._removed:
                return
            os.makedirs(root, mode=0o700, exist_ok=True)
            os.makedirs(os.path.join(self._dir, "slots"), mode=0o755)
            _host_dirs.write_owner(self._dir)
            for i in range(self._spec.slots):
                self._empty(i)
                self._slots.append(self._make_slot(self._spec.host_id, i, self.slot_dir(i)))

    def _empty(self, index: int) -> None:
        _host_dirs.empty_dir(
            self.slot_dir(index), self._owner_of(index), self._workspace_bytes, self._subdirs
        )

    @property
    def host_id(self) -> str:
        return self._spec.host_id

    @property
    def directory(self) -> str:
        return self._dir

    def slot_dir(self, index: int) -> str:
        return os.path.join(self._dir, "slots", str(index))

    def workspace_dir(self, index: int) -> str:
        return os.path.join(self.slot_dir(index), _host_dirs.WORKSPACE_DIR)

    def slot(self, index: int) -> DirectorySlot:
        if not 0 <= index < len(self._slots):
            raise IndexError(f"host {self.host_id} has no slot {index}")
        return self._slots[index]

    def _reset(self, index: int) -> None:
        with self._disk:
            if self._removed:
                return
            self._slots[index].kill_all()
            self._empty(index)

    async def reset_slot(self, index: int) -> None:
        if self._closed:
            raise SandboxError(f"host {self.host_id} is closed")
        await self.slot(index).stop()
        await anyio.to_thread.run_sync(self._reset, index)

    async def healthy(self) -> bool:
        if self._closed:
            return False
        return await anyio.to_thread.run_sync(
            lambda: os.path.isfile(os.path.join(self._dir, _host_dirs.OWNER_FILE))
        )

    def _remove(self) -> None:
        with self._disk:
            self._removed = True
            for slot in self._slots:
                slot.kill_all()
            _host_dirs.kill_marked(self.host_id + "/")
            if self._on_remove is not None:
                self._on_remove()
            unmount_beneath(self._dir)
            remove_tree(self._dir)

    async def close(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in self._slots:
                    tg.start_soon(slot.stop)
            await anyio.to_thread.run_sync(self._remove)
