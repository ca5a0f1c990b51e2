"""The signal policy of every long-running command (batch runner, ``atropos_env``).

- The first SIGINT or SIGTERM *drains*: no new work starts, in-flight work finishes and is
  written, then the command writes its summary and report and prints how to resume.
- A second, *distinct* signal *cancels* the in-flight work; the outputs are still written.
- A signal within :data:`DUPLICATE_WINDOW_S` of the first is the same request delivered twice
  (``uv run`` forwards to its child the signal the child already got from the process group,
  and a terminal's Ctrl-C reaches the whole group): it is ignored.
- Signals after the cancel are ignored too, so cleanup (releasing sandboxes) always finishes.
- The exit code of an interrupted command is ``128 + the first signal`` (130 for SIGINT, 143
  for SIGTERM), whether the drain completed or was cancelled.

The receiver stays installed for the whole run, cleanup included, so no signal falls back to
Python's default handling (a ``KeyboardInterrupt`` traceback, or death by SIGTERM with the
sandboxes still mounted).
"""

from __future__ import annotations

import enum
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import anyio
import anyio.abc
import attrs

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
#: a signal this soon (seconds) after the first is a duplicate delivery of it
DUPLICATE_WINDOW_S = 1.0


class Step(enum.Enum):
    """What one received signal asks for."""

    DRAIN = "drain"
    CANCEL = "cancel"
    IGNORE = "ignore"


def interrupted_exit_code(signum: int) -> int:
    """The exit code of a command interrupted by ``signum`` (the shell's convention)."""
    return 128 + signum


@attrs.define(slots=True)
class SignalCounter:
    """Turns received signals (with their arrival time) into steps; one per run."""

    window_s: float = DUPLICATE_WINDOW_S
    first: int | None = None
    first_at: float = 0.0
    cancelled: bool = False

    def receive(self, signum: int, now: float) -> Step:
        """The step for ``signum`` arriving at ``now`` (a monotonic time in seconds)."""
        if self.first is None:
            self.first, self.first_at = signum, now
            return Step.DRAIN
        if self.cancelled or now - self.first_at < self.window_s:
            return Step.IGNORE
        self.cancelled = True
        return Step.CANCEL


@attrs.define(slots=True)
class Interruption:
    """What signals asked of one run: ``drain`` is set by the first, ``cancel`` by a second
    distinct one. Make one per run."""

    drain: anyio.Event = attrs.field(factory=anyio.Event)
    cancel: anyio.Event = attrs.field(factory=anyio.Event)
    signum: int | None = None

    @property
    def exit_code(self) -> int | None:
        """``128 + signal`` once interrupted, else ``None``."""
        return None if self.signum is None else interrupted_exit_code(self.signum)

    def request(self, step: Step, signum: int) -> None:
        """Apply ``step`` (what :meth:`SignalCounter.receive` returned for ``signum``)."""
        if step is Step.DRAIN:
            self.signum = signum
            self.drain.set()
        elif step is Step.CANCEL:
            self.drain.set()
            self.cancel.set()


def _silent(signum: int) -> None:
    """The default notice: none."""


async def cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once ``event`` is set (e.g. :attr:`Interruption.drain`): start it in a
    task group beside the work the scope holds."""
    await event.wait()
    scope.cancel()


async def _receive(
    interruption: Interruption,
    on_drain: Callable[[int], None],
    on_cancel: Callable[[int], None],
    window_s: float,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Receive SIGINT/SIGTERM until cancelled and apply the policy to ``interruption``."""
    counter = SignalCounter(window_s=window_s)
    with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
        task_status.started()
        async for signum in received:
            step = counter.receive(int(signum), anyio.current_time())
            interruption.request(step, int(signum))
            if step is Step.DRAIN:
                on_drain(int(signum))
            elif step is Step.CANCEL:
                on_cancel(int(signum))


@asynccontextmanager
async def signals_watched(
    interruption: Interruption,
    *,
    on_drain: Callable[[int], None] = _silent,
    on_cancel: Callable[[int], None] = _silent,
    window_s: float = DUPLICATE_WINDOW_S,
) -> AsyncIterator[None]:
    """Apply the policy to ``interruption`` while the block runs, from its first line on;
    ``on_drain``/``on_cancel`` print the command's notice. Put the whole run in the block,
    cleanup included."""
    async with anyio.create_task_group() as tg:
        await tg.start(partial(_receive, interruption, on_drain, on_cancel, window_s))
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
