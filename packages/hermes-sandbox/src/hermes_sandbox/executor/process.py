"""A process that runs ``hermes-exec`` (directly, or inside bwrap) and its :class:`Executor`.

The process gets the agent's end of a control socketpair (its descriptor number is put on the
command line by the caller), runs in its own session, and is killed as a whole group on
:meth:`AgentProcess.stop`.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence

import anyio
from anyio.abc import Process, UNIXSocketStream

from hermes_sandbox._process import kill_group
from hermes_sandbox.executor.client import Executor, ExecutorDied, handshake

START_TIMEOUT_S = 30.0
_STDERR_CAP = 64 << 10
_REAP_TIMEOUT_S = 10.0


async def _stderr_tail(process: Process) -> str:
    """The last line the process wrote to stderr before it failed (read for up to 5 s)."""
    if process.stderr is None:
        return ""
    data = b""
    with anyio.move_on_after(5):
        async for chunk in process.stderr:
            data = (data + chunk)[-_STDERR_CAP:]
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


class AgentProcess:
    """One running agent process; :attr:`executor` runs commands through it."""

    def __init__(self, process: Process, executor: Executor) -> None:
        self.process = process
        self.executor = executor

    @classmethod
    async def start(
        cls,
        argv_for: Callable[[int], Sequence[str]],
        *,
        name: str,
        env: Mapping[str, str],
        pass_fds: Sequence[int] = (),
        user: int | None = None,
        group: int | None = None,
        cwd: str = "/",
    ) -> AgentProcess:
        """Start ``argv_for(control_fd)`` and wait for the agent's hello.

        Raises :class:`ExecutorDied` naming the last line of the process's stderr when the
        agent does not come up; nothing is left running then.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                process = await anyio.open_process(
                    list(argv_for(theirs.fileno())),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=dict(env),
                    start_new_session=True,
                    pass_fds=[theirs.fileno(), *pass_fds],
                    user=user,
                    group=group,
                    extra_groups=[] if user is not None else None,
                )
            finally:
                theirs.close()
        except OSError as exc:
            ours.close()
            raise ExecutorDied(f"could not start the command executor of {name}: {exc}") from exc
        control = await UNIXSocketStream.from_socket(ours)
        agent = cls(process, Executor(control, name))
        try:
            await handshake(control, START_TIMEOUT_S)
        except ExecutorDied as exc:
            with anyio.CancelScope(shield=True):
                why = await _stderr_tail(process)
                await agent.stop()
            raise ExecutorDied(f"{exc} (exit {process.returncode}: {why or 'no message'})") from exc
        except BaseException:
            await agent.stop()
            raise
        assert process.stderr is not None
        await process.stderr.aclose()
        return agent

    @property
    def alive(self) -> bool:
        return self.process.returncode is None and not self.executor.dead

    async def stop(self) -> None:
        """Kill the process group (and so every command) and reap it. Idempotent."""
        with anyio.CancelScope(shield=True):
            kill_group(self.process.pid)
            with anyio.move_on_after(_REAP_TIMEOUT_S):
                await self.process.wait()
            await self.process.aclose()
            await self.executor.aclose()
