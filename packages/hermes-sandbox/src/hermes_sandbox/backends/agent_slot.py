"""A directory slot whose commands are started by its executor agent (``hermes-exec``).

The agent starts with the slot's first command, after joining the slot's cgroups (so it and
every command it starts are counted and limited there without a migration per command), and
lives until the slot is reset or closed. Subclasses say how the agent runs (inside bwrap, or
as a plain process) and how a working directory is named; the command's request, the agent's
lifecycle and a dead agent's report are here, once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import anyio
from hermes_protocols import ExecResult

from hermes_sandbox._process import kill_group
from hermes_sandbox.backends import _host_dirs
from hermes_sandbox.backends._slot_files import HostFilesSlot
from hermes_sandbox.backends._workspace_fs import note_if_full
from hermes_sandbox.backends.cgroups import SlotCgroup
from hermes_sandbox.backends.slot_env import SlotEnv
from hermes_sandbox.executor import AgentProcess, ExecRequest, ExecutorDied
from hermes_sandbox.limits import ResourceLimits


class AgentSlot(HostFilesSlot):
    """Base of the ``bwrap`` and ``local`` slots (``directory``: the slot's directory)."""

    commands_die_with_agent = False
    """Whether every process a command leaves dies with the agent (bwrap: its pid namespace);
    otherwise a reset also kills the slot's processes by cgroup and by environment marker."""

    def __init__(
        self,
        host_id: str,
        index: int,
        directory: str,
        *,
        env: SlotEnv,
        limits: ResourceLimits,
        max_output_bytes: int,
        spawner: ThreadPoolExecutor,
        owner: tuple[int, int] | None = None,
        cgroup: SlotCgroup | None = None,
    ) -> None:
        self._slot_id = f"{host_id}/{index}"
        self._marker = f"{self._slot_id}/"
        self._dir = directory
        self._env = env
        self._limits = limits
        self._max_output_bytes = max_output_bytes
        self._spawner = spawner
        self._owner = owner
        self._cgroup = cgroup
        self._agent: AgentProcess | None = None
        self._lock: anyio.Lock | None = None  # made on the event loop, not in a worker thread

    @property
    def slot_id(self) -> str:
        return self._slot_id

    # -- what a subclass says ----------------------------------------------------------------

    @property
    def workspace(self) -> str:
        raise NotImplementedError

    def _cwd(self, cwd: str | None) -> str:
        """The working directory of a command, as the agent sees it (checked)."""
        raise NotImplementedError

    def _agent_argv(self, control: int, fds: Sequence[int]) -> list[str]:
        """How the agent starts, given its control descriptor and those of :meth:`_fd_data`."""
        raise NotImplementedError

    def _fd_data(self) -> list[bytes]:
        """Data the agent's start reads from inherited descriptors (seccomp programs)."""
        return []

    # -- commands ------------------------------------------------------------------------------

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
        request = ExecRequest(
            argv=("bash", "-c", command),
            env=self._env.build(self.workspace, self._marker, env),
            cwd=self._cwd(cwd),
            timeout_s=timeout,
            max_output_bytes=self._max_output_bytes,
            rlimits=self._limits.rlimits(),
            stdin=stdin,
        )
        agent = await self._running_agent()
        try:
            result = await agent.executor.run(request)
        except ExecutorDied as exc:
            await self._discard(agent)
            raise ExecutorDied(f"{exc} (it exited with {agent.returncode})") from exc
        return await note_if_full(result, self._dir, self._limits.disk_bytes)

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
                    f"the command executor of slot {self._slot_id} ended between commands "
                    f"(exit {code}); the next command starts a new one"
                )
            return agent

    async def _discard(self, agent: AgentProcess) -> None:
        if self._agent is agent:
            self._agent = None
        await agent.stop()

    async def _start(self) -> AgentProcess:
        fds = [_pipe_with(data) for data in self._fd_data()]
        try:
            return await AgentProcess.start(
                lambda control: self._joining_cgroups(self._agent_argv(control, fds)),
                name=f"slot {self._slot_id}",
                env={"PATH": self._env.path, _host_dirs.SLOT_MARKER_VAR: self._marker},
                spawner=self._spawner,
                pass_fds=fds,
                user=self._owner[0] if self._owner else None,
                group=self._owner[1] if self._owner else None,
            )
        finally:
            for fd in fds:
                os.close(fd)

    def _joining_cgroups(self, argv: list[str]) -> list[str]:
        """``argv`` behind a shell that moves itself into the slot's cgroups first."""
        if self._cgroup is None:
            return argv
        joins = [f"echo $$ > {shlex.quote(f)}" for f in self._cgroup.procs_files]
        return ["sh", "-c", " && ".join([*joins, 'exec "$0" "$@"']), *argv]

    async def stop(self) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            await agent.stop()

    def kill_all(self) -> None:
        # ``stop`` ends the agent first (and reaps it: a reaped pid is never signalled).
        agent = self._agent
        if agent is not None and agent.returncode is None:
            kill_group(agent.pid)
        if self._cgroup is not None:
            self._cgroup.kill_all()
        if not self.commands_die_with_agent:
            _host_dirs.kill_marked(self._marker)


def _pipe_with(data: bytes) -> int:
    """A pipe's read end already holding ``data`` (a few KiB: never blocks) and its EOF."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end
