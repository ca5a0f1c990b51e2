"""A process that runs ``hermes-exec`` (directly, or inside bwrap) and its :class:`Executor`.

The process gets the agent's end of a control socketpair (its descriptor number is put on the
command line by the caller), runs in its own session, and is killed as a whole group on
:meth:`AgentProcess.stop`.

It is spawned by the caller's *spawner*, a thread pool that lives as long as the processes it
starts: a spawn that switches user cannot use ``vfork``, so asyncio's spawn would hold the event
loop until the child has exec'd (100 concurrent sandbox starts took 10 s on a loaded machine),
and a short-lived worker thread will not do either: ``PR_SET_PDEATHSIG`` (bwrap's
``--die-with-parent``) fires when the *thread* that forked the process exits, which killed
sandboxes whenever an idle anyio worker thread ended.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor as SpawnerPool

import anyio
from anyio.abc import UNIXSocketStream

from hermes_sandbox._process import kill_group
from hermes_sandbox.executor.client import Executor, ExecutorDied, handshake

START_TIMEOUT_S = 120.0
_STDERR_CAP = 64 << 10
_REAP_TIMEOUT_S = 10.0
_GRACE_S = 2.0


def _stderr_tail(process: subprocess.Popen[bytes]) -> str:
    """The last line a dead process wrote to stderr (blocking: run it in a worker thread)."""
    if process.stderr is None:
        return ""
    data = process.stderr.read()[-_STDERR_CAP:]
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""


async def _kill_and_reap(process: subprocess.Popen[bytes]) -> None:
    with anyio.CancelScope(shield=True):
        kill_group(process.pid)
        await anyio.to_thread.run_sync(_reap, process, _REAP_TIMEOUT_S)


def _reap(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` s for the process to end (reaping it); whether it did."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


class AgentProcess:
    """One running agent process; :attr:`executor` runs commands through it."""

    def __init__(self, process: subprocess.Popen[bytes], executor: Executor) -> None:
        self.process = process
        self.executor = executor

    @classmethod
    async def start(
        cls,
        argv_for: Callable[[int], Sequence[str]],
        *,
        name: str,
        env: Mapping[str, str],
        spawner: SpawnerPool,
        pass_fds: Sequence[int] = (),
        user: int | None = None,
        group: int | None = None,
        cwd: str = "/",
    ) -> AgentProcess:
        """Start ``argv_for(control_fd)`` from a thread of ``spawner`` (which must outlive the
        process) and wait for the agent's hello.

        Raises :class:`ExecutorDied` naming the last line of the process's stderr when the
        agent does not come up; nothing is left running then.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spawned: list[subprocess.Popen[bytes]] = []
        argv = list(argv_for(theirs.fileno()))

        def spawn() -> None:
            spawned.append(
                subprocess.Popen(
                    argv,
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
            )

        try:
            await anyio.to_thread.run_sync(lambda: spawner.submit(spawn).result())
        except OSError as exc:
            ours.close()
            raise ExecutorDied(f"could not start the command executor of {name}: {exc}") from exc
        except BaseException:
            ours.close()
            if spawned:  # cancelled while the spawn finished in its thread
                await _kill_and_reap(spawned[0])
            raise
        finally:
            theirs.close()
        process = spawned[0]
        control = await UNIXSocketStream.from_socket(ours)
        agent = cls(process, Executor(control, name))
        try:
            await handshake(control, START_TIMEOUT_S)
        except ExecutorDied as exc:
            await agent.stop()
            why = ""
            with anyio.move_on_after(5):
                why = await anyio.to_thread.run_sync(_stderr_tail, process, abandon_on_cancel=True)
            raise ExecutorDied(f"{exc} (exit {process.returncode}: {why or 'no message'})") from exc
        except BaseException:
            await agent.stop()
            raise
        assert process.stderr is not None
        process.stderr.close()

        return agent

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process is gone (reaped here), else ``None``."""
        return self.process.poll()

    @property
    def alive(self) -> bool:
        return self.returncode is None and not self.executor.dead

    async def stop(self) -> None:
        """End the agent and every command: close its control socket (the agent kills every
        command, then exits), SIGKILL its process group if it has not ended within
        ``_GRACE_S``, and reap it. Idempotent (a reaped process is never signalled)."""
        with anyio.CancelScope(shield=True):
            await self.executor.aclose()
            if self.process.returncode is not None:
                return
            if not await anyio.to_thread.run_sync(_reap, self.process, _GRACE_S):
                await _kill_and_reap(self.process)
