"""A rollout on an event loop and a thread of its own, so that verifiers' interrupt handling
can neither cut our sandbox cleanup short nor leave our worker threads behind.

vf-eval turns SIGINT and SIGTERM into a ``KeyboardInterrupt`` raised wherever its main thread
is at that moment (seen here: inside a rollout's ``ssl.create_default_context``, the CPU-heavy
part of opening the model client). On verifiers' loop that exception unwinds our rollout at an
arbitrary line (a sandbox cgroup was left behind), and it later escapes ``asyncio.run``'s
cancellation of the other tasks, which closes the loop before AnyIO's callbacks that stop its
worker threads run: those threads are not daemons, so the interpreter then waits on them
forever. On a loop of its own a rollout only ever sees an AnyIO cancellation (when its caller is
cancelled, or when the interpreter starts shutting down), its worker threads end with that loop,
and its thread (not a daemon either) is joined at interpreter exit, after the cleanup.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

#: how often a loop looks whether the other side finished or gave up. Polling, not an event set
#: across threads: either loop may be closed by then, and a call into a stopped one never returns
POLL_S = 0.05
#: how long a cancelled caller waits for the rollout's cleanup (then its thread finishes it)
CLEANUP_WAIT_S = 60.0


async def run_on_own_loop(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()`` on a new event loop in a new thread; cancelling the caller cancels it
    there and waits up to :data:`CLEANUP_WAIT_S` for its cleanup. ``work``'s exception is
    raised here."""
    stop = threading.Event()
    results: list[T] = []
    errors: list[BaseException] = []
    thread = threading.Thread(
        target=_run, args=(work, stop, results, errors), name="hermes-rollout"
    )
    thread.start()
    try:
        while thread.is_alive():  # noqa: ASYNC110 (POLL_S)
            await anyio.sleep(POLL_S)
    finally:
        stop.set()
        with anyio.move_on_after(CLEANUP_WAIT_S, shield=True):
            while thread.is_alive():  # noqa: ASYNC110 (POLL_S)
                await anyio.sleep(POLL_S)
    if errors:
        raise errors[0]
    return results[0]


def _run(
    work: Callable[[], Awaitable[T]],
    stop: threading.Event,
    results: list[T],
    errors: list[BaseException],
) -> None:
    """The thread: ``work`` on its own loop until it returns or ``stop`` is set."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_when_set, stop, tg.cancel_scope)
            try:
                results.append(await work())
            except Exception as exc:  # raised again on the caller's loop
                errors.append(exc)
            finally:
                tg.cancel_scope.cancel()

    anyio.run(main)


async def _cancel_when_set(stop: threading.Event, scope: anyio.CancelScope) -> None:
    """Cancel the rollout once ``stop`` is set, or once the interpreter shuts down: a caller
    on a loop that closed before it could set ``stop`` (the ``KeyboardInterrupt`` escaping
    ``asyncio.run``'s clean-up) never will, and the interpreter waits for this thread."""
    while not stop.is_set() and threading.main_thread().is_alive():  # noqa: ASYNC110 (POLL_S)
        await anyio.sleep(POLL_S)
    scope.cancel()
