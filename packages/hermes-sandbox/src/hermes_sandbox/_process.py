"""Run one command as a process group with a timeout, capped output and guaranteed cleanup."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from hermes_protocols import ExecResult, SandboxError

from hermes_sandbox._output import CappedOutput

TIMEOUT_EXIT_CODE = 124
_REAP_TIMEOUT_S = 10.0


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid``; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _drain(stream: ByteReceiveStream | None, sink: CappedOutput) -> None:
    if stream is None:
        return
    async for chunk in stream:
        sink.feed(chunk)


async def _feed(stream: ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        if data:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass
    finally:
        await stream.aclose()


_DRAIN_GRACE_S = 1.0


async def _drain_all(
    process: Process, out: CappedOutput, err: CappedOutput, done: anyio.Event
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_drain, process.stdout, out)
        tg.start_soon(_drain, process.stderr, err)
    done.set()


async def _supervise(process: Process, drained: anyio.Event, scope: anyio.CancelScope) -> None:
    # Every process the command left behind dies with it: nothing survives an exec. A process
    # that left the group and still holds the pipes gets a short grace, then is ignored.
    await process.wait()
    kill_group(process.pid)
    with anyio.move_on_after(_DRAIN_GRACE_S):
        await drained.wait()
    scope.cancel()


async def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    max_output_bytes: int,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    user: int | None = None,
    group: int | None = None,
    after_kill: Callable[[], None] | None = None,
    running: set[int] | None = None,
) -> ExecResult:
    """Run ``argv`` in a new session; on timeout or cancellation kill its whole process group.

    ``after_kill`` runs (in a worker thread) after a timeout, to sweep processes that left the
    group. ``running`` holds the group ids of commands still running (for a reset to kill).
    Timed-out commands report exit code 124.
    """
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    started = time.monotonic()
    out, err = CappedOutput(max_output_bytes), CappedOutput(max_output_bytes)
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            user=user,
            group=group,
            extra_groups=[] if user is not None else None,
        )
    except OSError as exc:
        raise SandboxError(f"could not start {argv[0]!r}: {exc}") from exc
    timed_out = False
    if running is not None:
        running.add(process.pid)
    try:
        with anyio.move_on_after(timeout) as scope:
            drained = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_all, process, out, err, drained)
                if stdin is not None:
                    tg.start_soon(_feed, process.stdin, stdin)
                tg.start_soon(_supervise, process, drained, tg.cancel_scope)
        timed_out = scope.cancelled_caught
    finally:
        with anyio.CancelScope(shield=True):
            kill_group(process.pid)
            with anyio.move_on_after(_REAP_TIMEOUT_S):
                await process.wait()
            if after_kill is not None and timed_out:
                await anyio.to_thread.run_sync(after_kill)
            await process.aclose()
            if running is not None:
                running.discard(process.pid)
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    if timed_out:
        code = TIMEOUT_EXIT_CODE
    elif code < 0:
        code = 128 - code
    return ExecResult(
        exit_code=code,
        stdout=out.render(),
        stderr=err.render(),
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
        duration_s=time.monotonic() - started,
    )
