"""Hosts whose every slot is its own sandbox (a container) running ``hermes-exec`` as PID 1.

Shared by the ``docker`` and ``gvisor`` backends, which differ only in how a slot's sandbox is
launched and removed (a :class:`SandboxRuntime`). A slot's host side is a directory
``<root>/<host_id>/slots/<i>`` (a tmpfs of the disk limit where hermes may mount) holding the
``workspace``, ``tmp`` and ``shm`` the sandbox binds at the workspace path, ``/tmp`` and
``/var/tmp``, and ``/dev/shm``: everything a slot can write, in one size limit, on this machine.
Files are read and written there with the ``O_NOFOLLOW`` walk of
:mod:`~hermes_sandbox.backends._slot_files`, so a download never lands a symlink, a device or
a setuid bit here.

The agent connects back to a unix socket that the slot listens on in ``<host>/ctl/<i>`` (bound
read-only in the sandbox, unlinked once the agent is in: nothing else can connect), and every
command is a child of it (:mod:`hermes_sandbox.executor`). When the pool closes that socket, or
dies, the agent kills every command and exits, and with it the sandbox: orphans end by
themselves. Being PID 1 it cannot be killed from inside. A reset restores the slot in place
(every process but PID 1 killed, System V IPC and POSIX queues removed, the three directories
emptied), or replaces the sandbox by a fresh one where the sandbox could change more than that
(root, or a writable image).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import socket
import uuid
from collections.abc import Mapping
from typing import Protocol

import anyio
import attrs
from anyio.abc import SocketAttribute
from hermes_protocols import ExecResult, SandboxError

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._control_socket import SOCKET_NAME, accept_agent, listen
from hermes_sandbox.backends._removal import remove_tree
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends._workspace_fs import note_if_full, unmount_beneath
from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.executor import ExecRequest, Executor, handshake
from hermes_sandbox.limits import ResourceLimits

AGENT_PATH = "/.hermes/exec"
"""Where the agent binary is bound (read-only) in a slot's sandbox."""
CONTROL_DIR = "/.hermes/ctl"
"""Where the slot's control directory is bound (read-only) in its sandbox."""
CONTROL_SOCKET = f"{CONTROL_DIR}/{SOCKET_NAME}"
"""The socket the agent connects to."""
_HELLO_TIMEOUT_S = 30.0
_RESTORE_TIMEOUT_S = 60.0
# Run as the slot's user by its agent: every other process but PID 1 killed, System V IPC and
# POSIX message queues removed. With a read-only image and no privileges, these and the slot
# directories (emptied by the host afterwards) are all a slot could change.
_RESTORE = (
    "kill -9 -1 2>/dev/null; ipcrm --all 2>/dev/null; rm -f /dev/mqueue/* 2>/dev/null; exit 0"
)


@attrs.frozen(slots=True)
class SlotPaths:
    """The host side of one slot: its size-limited directory and control directory."""

    slot_dir: str
    control_dir: str

    @property
    def workspace(self) -> str:
        return os.path.join(self.slot_dir, _host_dirs.WORKSPACE_DIR)

    @property
    def tmp(self) -> str:
        return os.path.join(self.slot_dir, "tmp")

    @property
    def shm(self) -> str:
        return os.path.join(self.slot_dir, "shm")


class Sandbox(Protocol):
    """One launched slot sandbox."""

    async def remove(self) -> None:
        """SIGKILL everything in it and remove it (idempotent; call shielded)."""
        ...

    async def running(self) -> bool:
        """Whether it still runs (asked while its agent has not connected yet)."""
        ...


class SandboxRuntime(Protocol):
    """Launches slot sandboxes whose PID 1 is ``AGENT_PATH --connect CONTROL_SOCKET``, run as
    ``owner`` (uid, gid), with ``paths`` bound as the module docstring says."""

    async def launch(
        self, name: str, host: HostSpec, paths: SlotPaths, owner: tuple[int, int]
    ) -> Sandbox: ...

    async def prepare_workspace(self, paths: SlotPaths, owner: tuple[int, int]) -> None:
        """Fill a new, empty workspace (e.g. with an image's files) before a sandbox starts."""
        ...

    async def host_closed(self, host: HostSpec) -> None:
        """Remove what the runtime made for ``host`` outside its sandboxes (after them)."""
        ...


@attrs.frozen(slots=True, kw_only=True)
class AgentHostSettings:
    """What a backend tells its hosts, fixed once the backend is ready."""

    runtime: SandboxRuntime
    root_dir: str
    workspace: str
    limits: ResourceLimits
    env: SlotEnv
    uid_range: tuple[int, int]
    """Host uids slots run as (one per slot, hashed) when hermes runs as root."""
    slot_user: tuple[int, int] | None
    """The (uid, gid) every slot runs as instead (an image's own user, or root)."""
    as_root: bool
    """Whether hermes runs as root (else slots run as hermes' uid and own nothing else)."""
    switch_user: bool = False
    """The agent runs as the sandbox's root and switches each command to the slot's user (so
    no command can signal it: gVisor, whose PID 1 is killable from inside)."""
    mount_slots: bool
    restore_in_place: bool
    max_output_bytes: int
    max_read_bytes: int
    start_timeout_s: float


class AgentSlot(HostFilesSlot):
    """One slot sandbox; its files are accessed on the host side of its workspace."""

    def __init__(self, host: AgentHost, index: int, paths: SlotPaths) -> None:
        self._host = host
        self._index = index
        self._slot_id = f"{host.host_id}/{index}"
        self.paths = paths
        settings = host.settings
        if settings.slot_user is not None:
            self.owner = settings.slot_user
        elif not settings.as_root:
            self.owner = (os.geteuid(), os.getegid())
        else:
            self.owner = _host_dirs.slot_owner(self._slot_id, settings.uid_range)
        dir_owner = self.owner if settings.as_root else None
        self._files = WorkspaceFiles(
            paths.workspace, settings.workspace, dir_owner, settings.max_read_bytes
        )
        self._sandbox: Sandbox | None = None
        self._executor: Executor | None = None
        self._control: socket.socket | None = None
        self.lock = anyio.Lock()
        """Held while the sandbox is replaced or removed (a reset racing the host's close)."""

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return self._host.settings.workspace

    def _cwd(self, cwd: str | None) -> str:
        """Relative ``cwd`` stays in the workspace; an absolute one may be anywhere in the
        sandbox (e.g. a task image's ``/app``)."""
        if cwd is None:
            return self.workspace
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return posixpath.join(self.workspace, relative_slot_path(cwd, self.workspace))

    @property
    def alive(self) -> bool:
        """Whether the agent still holds its end of the control socket (nothing is ever
        sent on it after the hello, so anything readable is its end)."""
        if self._executor is None or self._executor.dead or self._control is None:
            return False
        try:
            return self._control.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _live(self) -> Executor:
        if self._executor is None or not self.alive:
            raise SandboxError(f"slot {self.slot_id}: its sandbox is gone; the pool replaces it")
        return self._executor

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        settings = self._host.settings
        request = ExecRequest(
            argv=("bash", "-c", command),
            env=settings.env.build(self.workspace, f"{self.slot_id}/", env),
            cwd=self._cwd(cwd),
            timeout_s=timeout,
            max_output_bytes=settings.max_output_bytes,
            rlimits=settings.limits.rlimits(),
            stdin=stdin,
            user=self.owner if settings.switch_user else None,
        )
        result = await self._live().run(request)
        return await note_if_full(result, self.paths.slot_dir, self._host.disk_bytes)

    async def restore(self) -> bool:
        """Restore the slot in place; ``False`` when it cannot be (then replace it)."""
        try:
            done = await self._live().run(
                ExecRequest(
                    argv=("bash", "-c", _RESTORE),
                    env={"PATH": self._host.settings.env.path},
                    cwd="/",
                    timeout_s=_RESTORE_TIMEOUT_S,
                    max_output_bytes=4096,
                    user=self.owner if self._host.settings.switch_user else None,
                )
            )
        except SandboxError:
            return False
        if not done.ok or not self.alive:
            return False
        await anyio.to_thread.run_sync(self._clear_dirs)
        return True

    def _clear_dirs(self) -> None:
        owner = self.owner if self._host.settings.as_root else None
        for name, mode in _host_dirs.slot_subdirs(scratch=True):
            _host_dirs.clear_dir(os.path.join(self.paths.slot_dir, name), owner, mode)

    async def start(self) -> None:
        """Launch a fresh sandbox on the slot's directories and connect to its agent."""
        settings = self._host.settings
        listener, path = await anyio.to_thread.run_sync(listen, self.paths.control_dir)
        name = f"{self.slot_id.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
        sandbox: Sandbox | None = None
        try:
            with listener:
                sandbox = await settings.runtime.launch(
                    name, self._host.spec, self.paths, self.owner
                )
                control = await accept_agent(
                    listener, sandbox.running, name, settings.start_timeout_s
                )
            os.unlink(path)  # nothing in the sandbox can connect again
            await handshake(control, _HELLO_TIMEOUT_S)
        except BaseException:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                if sandbox is not None:
                    await sandbox.remove()
            raise
        self._sandbox, self._executor = sandbox, Executor(control, self.slot_id)
        self._control = control.extra(SocketAttribute.raw_socket)

    async def stop(self) -> None:
        """Remove the sandbox (everything in it is SIGKILLed) and close the control socket.
        Idempotent."""
        with anyio.CancelScope(shield=True):
            if self._sandbox is not None:
                await self._sandbox.remove()
            if self._executor is not None:
                await self._executor.aclose()
            self._executor, self._sandbox, self._control = None, None, None


class AgentHost:
    """``spec.slots`` slot sandboxes with their directories under ``<root_dir>/<host_id>``."""

    def __init__(self, spec: HostSpec, settings: AgentHostSettings) -> None:
        self.spec = spec
        self.settings = settings
        self._dir = os.path.join(settings.root_dir, spec.host_id)
        self.disk_bytes = settings.limits.disk_bytes if settings.mount_slots else None
        self._slots = [
            AgentSlot(
                self,
                i,
                SlotPaths(
                    os.path.join(self._dir, "slots", str(i)), os.path.join(self._dir, "ctl", str(i))
                ),
            )
            for i in range(spec.slots)
        ]
        self._closed = False

    @classmethod
    async def create(cls, spec: HostSpec, settings: AgentHostSettings) -> AgentHost:
        """Make the directories and start every slot's sandbox (concurrently)."""
        host = cls(spec, settings)
        try:
            await anyio.to_thread.run_sync(host._create_dirs)
            async with anyio.create_task_group() as tg:
                for slot in host._slots:
                    tg.start_soon(host._start_fresh, slot)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await host.close()
            raise
        return host

    def _empty_slot_dir(self, slot: AgentSlot) -> None:
        owner = slot.owner if self.settings.as_root else None
        subdirs = _host_dirs.slot_subdirs(scratch=True)
        _host_dirs.empty_dir(slot.paths.slot_dir, owner, self.disk_bytes, subdirs)

    def _create_dirs(self) -> None:
        os.makedirs(os.path.join(self._dir, "slots"), mode=0o700)
        os.makedirs(os.path.join(self._dir, "ctl"), mode=0o711)
        _host_dirs.write_owner(self._dir)
        for slot in self._slots:
            os.mkdir(slot.paths.control_dir, 0o711)  # the slot's uid reaches only the socket
            self._empty_slot_dir(slot)

    @property
    def host_id(self) -> str:
        return self.spec.host_id

    def slot(self, index: int) -> AgentSlot:
        return self._slots[index]

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"host {self.host_id} is closed")

    async def reset_slot(self, index: int) -> None:
        slot = self._slots[index]
        async with slot.lock:
            self._check_open()
            if self.settings.restore_in_place and await slot.restore():
                return
            await slot.stop()
            await anyio.to_thread.run_sync(self._empty_slot_dir, slot)
            self._check_open()
            await self._start_fresh(slot)

    async def _start_fresh(self, slot: AgentSlot) -> None:
        """Start ``slot``'s sandbox on its (new, empty) directories."""
        await self.settings.runtime.prepare_workspace(slot.paths, slot.owner)
        await slot.start()

    async def healthy(self) -> bool:
        """Every slot's agent is connected (a slot being reset or replaced counts as alive)."""
        return not self._closed and all(slot.lock.locked() or slot.alive for slot in self._slots)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in self._slots:
                    tg.start_soon(_stop_locked, slot)
            await self.settings.runtime.host_closed(self.spec)
            await anyio.to_thread.run_sync(self._remove_dirs)

    def _remove_dirs(self) -> None:
        unmount_beneath(self._dir)
        remove_tree(self._dir)


async def _stop_locked(slot: AgentSlot) -> None:
    async with slot.lock:  # a reset in progress finishes (or fails) first
        await slot.stop()
