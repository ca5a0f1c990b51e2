"""Scheduling: run planned rollouts concurrently, write each as it finishes, stop cleanly.

:func:`execute` launches at most ``concurrency`` rollouts at once on one anyio loop. Setting
``stop`` stops launching and lets in-flight rollouts finish for up to ``drain_timeout``
seconds; setting ``cancel`` (or the drain timeout) cancels them. A cancelled rollout is not
written, so a resumed run does it again; a written one is never done twice.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeAlias

import anyio
import attrs
from hermes_protocols import Item, JSONObject, ScoredRollout
from hermes_rollouts import rollout_id, rollout_record

from hermes_batch_runner.filters import WriteFilters
from hermes_batch_runner.jsonl_log import JsonlLog
from hermes_batch_runner.summary import generated_tokens

Status: TypeAlias = Literal["kept", "failed", "filtered"]
RolloutFn = Callable[[Item, int, int], Awaitable[ScoredRollout]]
"""``(item, item_index, group_index) -> ScoredRollout``; must not raise for rollout failures."""
FinishedCallback = Callable[[Status, JSONObject], None]


@attrs.frozen(slots=True)
class PlannedRollout:
    """One rollout to do: group member ``group_index`` of the ``item_index``-th item."""

    id: str
    item: Item
    item_index: int
    group_index: int


def plan_rollouts(
    env: str, items: Sequence[Item], group_size: int, done: frozenset[str] | set[str]
) -> tuple[list[PlannedRollout], int]:
    """The rollouts still to do, and how many rollouts the run expects in total."""
    planned = [
        PlannedRollout(rollout_id(env, item.id, g), item, index, g)
        for index, item in enumerate(items)
        for g in range(group_size)
    ]
    ids = [p.id for p in planned]
    if len(set(ids)) != len(ids):
        raise ValueError("two items share an id; item ids must be unique")
    return [p for p in planned if p.id not in done], len(planned)


class RolloutSink:
    """Routes finished rollouts to ``trajectories`` / ``failed`` / ``filtered`` logs."""

    def __init__(
        self,
        *,
        kept: JsonlLog,
        failed: JsonlLog,
        filtered: JsonlLog,
        filters: WriteFilters,
        model: str,
    ) -> None:
        self._logs = {"kept": kept, "failed": failed, "filtered": filtered}
        self._filters = filters
        self._model = model
        self.rollouts = 0
        self.generated_tokens = 0

    async def accept(
        self, planned: PlannedRollout, rollout: ScoredRollout
    ) -> tuple[Status, JSONObject]:
        """Write one finished rollout durably to the log its outcome belongs in."""
        record = rollout_record(rollout, record_id=planned.id, model=self._model)
        record["finished_at"] = round(time.time(), 3)  # the report's throughput over time
        status: Status
        if rollout.failure is not None:
            status = "failed"
        else:
            reason = self._filters.reason(record)
            status = "kept" if reason is None else "filtered"
            if reason is not None:
                record["filter_reason"] = reason
        await self._logs[status].append(record)
        self.rollouts += 1
        self.generated_tokens += generated_tokens(record)
        return status, record


@attrs.define(slots=True)
class Outcome:
    """How :func:`execute` ended."""

    finished: int = 0
    generated_tokens: int = 0
    interrupted: bool = False
    cancelled_in_flight: int = 0
    elapsed_s: float = 0.0


async def execute(
    plan: Sequence[PlannedRollout],
    run_one: RolloutFn,
    sink: RolloutSink,
    *,
    concurrency: int,
    stop: anyio.Event,
    cancel: anyio.Event,
    drain_timeout: float,
    on_finished: FinishedCallback | None = None,
) -> Outcome:
    """Run ``plan`` with at most ``concurrency`` rollouts in flight; see the module doc."""
    outcome = Outcome()
    slots = anyio.Semaphore(concurrency)
    workers = anyio.CancelScope()
    launching = anyio.CancelScope()

    async def one(planned: PlannedRollout) -> None:
        try:
            rollout = await run_one(planned.item, planned.item_index, planned.group_index)
            status, record = await sink.accept(planned, rollout)
        except anyio.get_cancelled_exc_class():
            outcome.cancelled_in_flight += 1
            raise
        finally:
            slots.release()
        outcome.finished += 1
        if on_finished is not None:
            on_finished(status, record)

    async def watch() -> None:
        await stop.wait()
        outcome.interrupted = True
        launching.cancel()
        with anyio.move_on_after(drain_timeout):
            await cancel.wait()
        workers.cancel()

    started = anyio.current_time()
    async with anyio.create_task_group() as outer:
        outer.start_soon(watch)
        with workers:
            async with anyio.create_task_group() as tg:
                with launching:
                    for planned in plan:
                        await slots.acquire()
                        if stop.is_set():
                            slots.release()
                            break
                        tg.start_soon(one, planned)
        outer.cancel_scope.cancel()
    outcome.elapsed_s = anyio.current_time() - started
    return outcome
