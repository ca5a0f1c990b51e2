"""The CLI's drain: no new items once draining, the run's work cancelled when nothing is in
flight, at a second signal or at the drain timeout; the error behind atroposlib's retries."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import anyio
import pytest
import tenacity
from hermes_atropos_env.cli import _cancel_after_drain, _last_attempt
from hermes_rollouts import Interruption
from hermes_rollouts.signal_policy import Step


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeEnv:
    def __init__(self, drain_timeout: float) -> None:
        self.config = SimpleNamespace(drain_timeout=drain_timeout)
        self.busy = True
        self.taking_items = True

    def stop_taking_items(self) -> None:
        self.taking_items = False


async def _drain(env: FakeEnv, interruption: Interruption, then: str) -> float:
    """Seconds from the first signal to the work's cancellation."""
    started = 0.0
    async with anyio.create_task_group() as work:
        work.start_soon(_cancel_after_drain, env, interruption, work.cancel_scope)
        await anyio.sleep(0.05)
        assert env.taking_items
        started = anyio.current_time()
        interruption.request(Step.DRAIN, signal.SIGTERM)
        await anyio.sleep(0.3)
        assert not env.taking_items
        if then == "idle":
            env.busy = False
        elif then == "cancel":
            interruption.request(Step.CANCEL, signal.SIGTERM)
        with anyio.fail_after(5):
            await anyio.sleep_forever()
    return anyio.current_time() - started


@pytest.mark.anyio
@pytest.mark.parametrize("then", ["idle", "cancel"])
async def test_the_work_ends_when_nothing_is_in_flight_or_at_a_second_signal(then: str) -> None:
    elapsed = await _drain(FakeEnv(drain_timeout=60), Interruption(), then)
    assert 0.3 <= elapsed < 1.5


@pytest.mark.anyio
async def test_the_drain_timeout_cancels_the_work() -> None:
    elapsed = await _drain(FakeEnv(drain_timeout=0.5), Interruption(), "wait")
    assert 0.5 <= elapsed < 1.5


def test_the_error_behind_retries_is_shown() -> None:
    @tenacity.retry(stop=tenacity.stop_after_attempt(2), wait=tenacity.wait_none())
    def connect() -> None:
        raise ConnectionError("cannot connect to 127.0.0.1:1")

    with pytest.raises(tenacity.RetryError) as caught:
        connect()
    error = _last_attempt(caught.value)
    assert isinstance(error, ConnectionError)
    assert str(error) == "cannot connect to 127.0.0.1:1"
    plain = ValueError("x")
    assert _last_attempt(plain) is plain
