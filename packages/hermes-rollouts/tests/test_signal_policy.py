"""The signal policy: first signal drains, a duplicate within the window is ignored, a second
distinct one cancels, nothing after that; real signals to this process reach the policy."""

from __future__ import annotations

import os
import signal

import anyio
import pytest
from hermes_rollouts import DUPLICATE_WINDOW_S, Interruption, SignalCounter, signals_watched
from hermes_rollouts.signal_policy import Step, interrupted_exit_code
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_uvs_forwarded_duplicate_is_one_signal_and_a_later_one_cancels() -> None:
    counter = SignalCounter()
    assert counter.receive(signal.SIGTERM, 10.0) is Step.DRAIN
    assert counter.receive(signal.SIGTERM, 10.001) is Step.IGNORE  # uv's forward
    assert counter.receive(signal.SIGINT, 10.0 + DUPLICATE_WINDOW_S) is Step.CANCEL
    assert counter.receive(signal.SIGINT, 20.0) is Step.IGNORE


@given(st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), min_size=1, max_size=20))
def test_one_drain_first_and_at_most_one_cancel_outside_the_window(gaps: list[float]) -> None:
    counter = SignalCounter(window_s=1.0)
    now, steps = 0.0, []
    for gap in gaps:
        now += gap
        steps.append((now, counter.receive(signal.SIGINT, now)))
    assert steps[0][1] is Step.DRAIN
    cancels = [t for t, step in steps if step is Step.CANCEL]
    assert len(cancels) <= 1
    later = [t for t, _ in steps[1:] if t - steps[0][0] >= 1.0]
    assert cancels == later[:1]


def test_the_exit_code_is_128_plus_the_first_signal() -> None:
    interruption = Interruption()
    assert interruption.exit_code is None
    interruption.request(Step.DRAIN, signal.SIGTERM)
    interruption.request(Step.CANCEL, signal.SIGINT)
    assert interruption.drain.is_set()
    assert interruption.cancel.is_set()
    assert interruption.exit_code == interrupted_exit_code(signal.SIGTERM) == 143


@pytest.mark.anyio
async def test_real_signals_drain_then_cancel() -> None:
    interruption = Interruption()
    seen: list[str] = []
    async with signals_watched(
        interruption,
        on_drain=lambda s: seen.append(f"drain {s}"),
        on_cancel=lambda s: seen.append(f"cancel {s}"),
        window_s=0.3,
    ):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        with anyio.fail_after(5):
            await interruption.drain.wait()
        await anyio.sleep(0.1)
        assert not interruption.cancel.is_set()
        await anyio.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
        with anyio.fail_after(5):
            await interruption.cancel.wait()
    assert seen == [f"drain {int(signal.SIGTERM)}", f"cancel {int(signal.SIGINT)}"]
    assert interruption.exit_code == 143
