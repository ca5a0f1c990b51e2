"""A bwrap slot: one long-lived bubblewrap sandbox whose agent (``hermes-exec``) runs commands.

The sandbox starts with the slot's first command and lives until the slot is reset or closed:
namespaces, cgroups and the seccomp filters are set up once, and every command is a child of
the agent in a pid namespace of its own (see :mod:`hermes_sandbox.executor`). A reset stops the
sandbox, so the next trajectory gets a new one over an emptied slot directory.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import anyio
import attrs
from hermes_protocols import ExecResult

from hermes_sandbox._paths import relative_slot_path
from hermes_sandbox._process import kill_group
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._slot_files import HostFilesSlot, WorkspaceFiles
from hermes_sandbox.backends._workspace_fs import note_if_full
from hermes_sandbox.backends.bwrap_command import bwrap_argv
from hermes_sandbox.backends.cgroups import SlotCgroup
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.executor import AgentProcess, ExecRequest, ExecutorDied
from hermes_sandbox.limits import ResourceLimits

WORKSPACE = "/workspace"


@attrs.frozen(slots=True, kw_only=True)
class SandboxSetup:
    """What every slot sandbox of one backend shares (prepared once by the backend)."""

    binary: str
    binds: tuple[str, ...]
    agent: str
    agent_filter: bytes | None
    command_filter: bytes | None
    limits: ResourceLimits
    env: SlotEnv
    max_output_bytes: int
    spawner: ThreadPoolExecutor
    """The threads that start sandboxes; they live as long as the backend's sandboxes
    (bwrap's ``--die-with-parent`` ties a sandbox to the thread that started it)."""
    allow_network: bool
    disable_userns: bool
    mount_slots: bool
    """A tmpfs of ``limits.disk_bytes`` is mounted on every slot directory, which then also
    holds the sandbox's ``/tmp`` and ``/dev/shm`` (one disk limit for all three); otherwise
    ``/tmp`` and ``/dev/shm`` are tmpfs of ``limits.disk_bytes`` each.

    The backend builds one setup and derives each host's with its (budget-fitted) ``limits``.
    """

    @property
    def slot_bytes(self) -> int | None:
        """The size of the tmpfs on each slot directory (``None``: none mounted)."""
        return self.limits.disk_bytes if self.mount_slots else None


def _pipe_with(data: bytes) -> int:
    """A pipe's read end already holding ``data`` (a few KiB: never blocks) and its EOF."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


class BwrapSlot(HostFilesSlot):
    """A slot whose commands run in its bubblewrap sandbox; its files are accessed directly."""

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        setup: SandboxSetup,
        owner: tuple[int, int] | None,
        cgroup: SlotCgroup | None = None,
    ) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._marker = f"{self._slot_id}/"
        self._dir = directory
        self._setup = setup
        self._owner = owner
        self._cgroup = cgroup
        self._files = WorkspaceFiles(
            os.path.join(directory, _host_dirs.WORKSPACE_DIR), WORKSPACE, owner
        )
        self._agent: AgentProcess | None = None
        self._lock: anyio.Lock | None = None  # made on the event loop, not in a worker thread

    @property
    def slot_id(self) -> str:
        return self._slot_id

    @property
    def workspace(self) -> str:
        return WORKSPACE

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        if posixpath.isabs(cwd):
            return posixpath.normpath(cwd)
        return posixpath.join(WORKSPACE, relative_slot_path(cwd, WORKSPACE))

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
        setup = self._setup
        request = ExecRequest(
            argv=("bash", "-c", command),
            env=setup.env.build(WORKSPACE, self._marker, env),
            cwd=self._cwd(cwd),
            timeout_s=timeout,
            max_output_bytes=setup.max_output_bytes,
            rlimits=setup.limits.rlimits(),
            stdin=stdin,
        )
        agent = await self._running_agent()
        try:
            result = await agent.executor.run(request)
        except ExecutorDied as exc:
            await self._discard(agent)
            raise ExecutorDied(f"{exc} (its sandbox exited with {agent.returncode})") from exc
        return await note_if_full(result, self._dir, setup.limits.disk_bytes)

    async def _running_agent(self) -> AgentProcess:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            agent = self._agent
            if agent is None:
                self._agent = agent = await self._start()
            elif not agent.alive:
                code = agent.returncode
                await self._discard(agent)
                raise ExecutorDied(
                    f"the sandbox of slot {self._slot_id} ended between commands (exit {code}); "
                    "the next command starts a new one"
                )
            return agent

    async def _discard(self, agent: AgentProcess) -> None:
        if self._agent is agent:
            self._agent = None
        await agent.stop()

    async def _start(self) -> AgentProcess:
        setup = self._setup
        fds = []
        try:
            if setup.agent_filter is not None and setup.command_filter is not None:
                fds = [_pipe_with(setup.agent_filter), _pipe_with(setup.command_filter)]
            return await AgentProcess.start(
                lambda control: self._argv(control, fds),
                name=f"slot {self._slot_id}",
                env={"PATH": setup.env.path, _host_dirs.SLOT_MARKER_VAR: self._marker},
                spawner=setup.spawner,
                pass_fds=fds,
                user=self._owner[0] if self._owner else None,
                group=self._owner[1] if self._owner else None,
            )
        finally:
            for fd in fds:
                os.close(fd)

    def _argv(self, control: int, filter_fds: list[int]) -> list[str]:
        setup = self._setup
        agent_args = ["--control-fd", str(control), "--pidns"]
        if filter_fds:
            agent_args += ["--seccomp-fd", str(filter_fds[1])]
        scratch = (
            (os.path.join(self._dir, "tmp"), os.path.join(self._dir, "shm"))
            if setup.slot_bytes is not None
            else None
        )
        argv = bwrap_argv(
            setup.binary,
            binds=setup.binds,
            workspace_host=os.path.join(self._dir, _host_dirs.WORKSPACE_DIR),
            workspace_inner=WORKSPACE,
            allow_network=setup.allow_network,
            agent=setup.agent,
            agent_args=agent_args,
            scratch_dirs=scratch,
            scratch_bytes=setup.limits.disk_bytes,
            seccomp_fd=filter_fds[0] if filter_fds else None,
            disable_userns=setup.disable_userns,
        )
        if self._cgroup is None:
            return argv
        # Join the slot's cgroups before bwrap starts, so every process is inside them.
        joins = [f"echo $$ > {shlex.quote(f)}" for f in self._cgroup.procs_files]
        return ["sh", "-c", " && ".join([*joins, 'exec "$0" "$@"']), *argv]

    async def stop(self) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            await agent.stop()

    def kill_all(self) -> None:
        # Every process of the slot is in its sandbox's pid namespace, which dies with bwrap;
        # ``stop`` ends it (and reaps it: a reaped pid is never signalled, pids are reused).
        agent = self._agent
        if agent is not None and agent.returncode is None:
            kill_group(agent.pid)
        if self._cgroup is not None:
            self._cgroup.kill_all()
