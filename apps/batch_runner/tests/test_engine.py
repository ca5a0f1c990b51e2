from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hermes_batch_runner.engine import Outcome, RolloutSink, execute, plan_rollouts
from hermes_batch_runner.filters import WriteFilters
from hermes_batch_runner.jsonl_log import JsonlLog, read_records
from hermes_protocols import Item, ScoredRollout

MakeRollout = Callable[..., ScoredRollout]


class Recorder:
    """A rollout function that tracks how many run at once and can block until released."""

    def __init__(self, make: MakeRollout, *, delay: float = 0.01) -> None:
        self.make = make
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.started: list[tuple[str, int]] = []
        self.release = anyio.Event()
        self.block = False
        self._waiters: list[tuple[int, anyio.Event]] = []

    async def wait_in_flight(self, n: int) -> None:
        """Return once ``n`` rollouts are running at the same time."""
        if self.in_flight >= n:
            return
        event = anyio.Event()
        self._waiters.append((n, event))
        await event.wait()

    async def __call__(self, item: Item, index: int, group_index: int) -> ScoredRollout:
        self.started.append((item.id, group_index))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        for n, event in self._waiters:
            if self.in_flight >= n:
                event.set()
        try:
            if self.block:
                await self.release.wait()
            await anyio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        reward = None if item.id == "bad" else 1.0
        return self.make(item.id, group_index, reward=reward, env="e")


def _items(n: int) -> list[Item]:
    return [Item(id=f"i{k}") for k in range(n)]


def test_plan_skips_done_ids_and_counts_every_expected_rollout() -> None:
    plan, expected = plan_rollouts("e", _items(3), 2, {"e/i0/1", "e/i2/0"})
    assert expected == 6
    assert [p.id for p in plan] == ["e/i0/0", "e/i1/0", "e/i1/1", "e/i2/1"]
    with pytest.raises(ValueError, match="unique"):
        plan_rollouts("e", [Item("x"), Item("x")], 1, set())


async def _run(
    tmp_path: Path,
    recorder: Recorder,
    items: list[Item],
    *,
    concurrency: int,
    stop: anyio.Event,
    cancel: anyio.Event,
    drain_timeout: float = 5.0,
    filters: WriteFilters | None = None,
) -> tuple[Outcome, dict[str, list[str]]]:
    plan, _ = plan_rollouts("e", items, 1, set())
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("kept", "failed", "filtered")}
    async with (
        JsonlLog(paths["kept"]) as kept,
        JsonlLog(paths["failed"]) as failed,
        JsonlLog(paths["filtered"]) as filtered,
    ):
        sink = RolloutSink(
            kept=kept,
            failed=failed,
            filtered=filtered,
            filters=filters or WriteFilters(),
            model="m",
        )
        with anyio.fail_after(20):
            outcome = await execute(
                plan,
                recorder,
                sink,
                concurrency=concurrency,
                stop=stop,
                cancel=cancel,
                drain_timeout=drain_timeout,
            )
    written = {name: [r["id"] for r in read_records(p)] for name, p in paths.items()}
    return outcome, written


@pytest.mark.anyio
@pytest.mark.parametrize("concurrency", [1, 3])
async def test_concurrency_is_bounded_and_every_rollout_is_written_once(
    tmp_path: Path, make_rollout: MakeRollout, concurrency: int
) -> None:
    recorder = Recorder(make_rollout)
    items = [*_items(7), Item("bad")]
    outcome, written = await _run(
        tmp_path, recorder, items, concurrency=concurrency, stop=anyio.Event(), cancel=anyio.Event()
    )
    assert recorder.max_in_flight == concurrency
    assert sorted(written["kept"]) == sorted(f"e/i{k}/0" for k in range(7))
    assert written["failed"] == ["e/bad/0"]
    assert outcome.finished == 8


@pytest.mark.anyio
async def test_filtered_rollouts_go_to_their_own_log(
    tmp_path: Path, make_rollout: MakeRollout
) -> None:
    _, written = await _run(
        tmp_path,
        Recorder(make_rollout),
        _items(2),
        concurrency=2,
        stop=anyio.Event(),
        cancel=anyio.Event(),
        filters=WriteFilters(min_reward=2.0),
    )
    assert written["kept"] == []
    assert sorted(written["filtered"]) == ["e/i0/0", "e/i1/0"]


@pytest.mark.anyio
async def test_stop_finishes_in_flight_rollouts_and_launches_no_more(
    tmp_path: Path, make_rollout: MakeRollout
) -> None:
    recorder = Recorder(make_rollout)
    recorder.block = True
    stop, cancel = anyio.Event(), anyio.Event()

    async def interrupt() -> None:
        await recorder.wait_in_flight(2)
        stop.set()
        await anyio.sleep(0.05)
        recorder.release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt)
        outcome, written = await _run(
            tmp_path, recorder, _items(10), concurrency=2, stop=stop, cancel=cancel
        )
    assert outcome.interrupted
    assert len(recorder.started) == 2
    assert sorted(written["kept"]) == ["e/i0/0", "e/i1/0"]


@pytest.mark.anyio
async def test_cancel_drops_in_flight_rollouts_without_writing_them(
    tmp_path: Path, make_rollout: MakeRollout
) -> None:
    recorder = Recorder(make_rollout)
    recorder.block = True
    stop, cancel = anyio.Event(), anyio.Event()

    async def interrupt() -> None:
        await recorder.wait_in_flight(3)
        stop.set()
        cancel.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt)
        outcome, written = await _run(
            tmp_path, recorder, _items(10), concurrency=3, stop=stop, cancel=cancel
        )
    assert outcome.cancelled_in_flight == 3
    assert recorder.in_flight == 0
    assert written == {"kept": [], "failed": [], "filtered": []}


@pytest.mark.anyio
async def test_the_drain_timeout_cancels_rollouts_that_do_not_finish(
    tmp_path: Path, make_rollout: MakeRollout
) -> None:
    recorder = Recorder(make_rollout)
    recorder.block = True
    stop = anyio.Event()
    stop.set()  # interrupted before the first launch
    outcome, _ = await _run(
        tmp_path, recorder, _items(3), concurrency=2, stop=stop, cancel=anyio.Event()
    )
    assert recorder.started == []
    assert outcome.interrupted

    second = tmp_path / "second"
    second.mkdir()
    recorder2 = Recorder(make_rollout)
    recorder2.block = True
    stop2 = anyio.Event()

    async def interrupt() -> None:
        await recorder2.wait_in_flight(1)
        stop2.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt)
        outcome2, _ = await _run(
            second,
            recorder2,
            _items(3),
            concurrency=1,
            stop=stop2,
            cancel=anyio.Event(),
            drain_timeout=0.1,
        )
    assert outcome2.cancelled_in_flight == 1
