"""endless_terminals: every family, every difficulty: oracle 1.0, do-nothing 0.0."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest
from hermes_envs import (
    EndlessTerminalsConfig,
    EndlessTerminalsEnv,
    RolloutRunner,
    SlotRewardContext,
)
from hermes_envs.endless import FAMILIES, generate_task
from hermes_protocols import AgentResult, FailureKind, SandboxError, ScoredRollout, StopReason
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.anyio


def test_at_least_twenty_families() -> None:
    assert len(FAMILIES) >= 20


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_oracle_solves_and_idle_fails(
    family: str, pool: Any, toolsets: Any, oracle_agent: Any, idle_agent: Any
) -> None:
    env = EndlessTerminalsEnv(EndlessTerminalsConfig(families=(family,)))
    items = list(itertools.islice(env.items(seed=7), 3))
    for level, item in zip((1, 2, 3), items, strict=True):
        item = type(item)(item.id, {**item.data, "difficulty": level})
        oracle = RolloutRunner(env, pool, oracle_agent(env.oracle_solution(item)), toolsets)
        solved = await oracle.run_rollout(item, toolsets)
        assert solved.score is not None, solved.failure
        assert solved.score.reward == 1.0, (level, solved.score.details)
        idle = RolloutRunner(env, pool, idle_agent, toolsets)
        unsolved = await idle.run_rollout(item, toolsets)
        assert unsolved.score is not None, unsolved.failure
        assert unsolved.score.reward == 0.0, level
        assert unsolved.score.failure is FailureKind.MODEL


@settings(max_examples=40)
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    level=st.sampled_from((1, 2, 3)),
    seed=st.integers(0, 2**32 - 1),
)
def test_generation_is_deterministic(family: str, level: int, seed: int) -> None:
    assert generate_task(family, level, seed) == generate_task(family, level, seed)


def test_item_stream_is_seeded_and_covers_families() -> None:
    env = EndlessTerminalsEnv()
    first = list(itertools.islice(env.items(seed=3), 60))
    again = list(itertools.islice(env.items(seed=3), 60))
    other = list(itertools.islice(env.items(seed=4), 60))
    assert first == again
    assert first != other
    assert {i.data["family"] for i in first} == set(FAMILIES)
    assert len({i.id for i in first}) == len(first)


def test_different_seeds_give_different_tasks() -> None:
    tasks = {generate_task("csv_sum", 2, s).files["sales.csv"] for s in range(20)}
    assert len(tasks) == 20


async def test_items_are_independent_across_slots(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    """Two different items solved concurrently in separate slots both score 1.0 and a
    solution applied to the wrong item fails (no shared state between slots)."""
    env = EndlessTerminalsEnv(EndlessTerminalsConfig(families=("csv_sum",)))
    a, b = itertools.islice(env.items(seed=11), 2)
    runner_a = RolloutRunner(env, pool, oracle_agent(env.oracle_solution(a)), toolsets)
    group: list[ScoredRollout] = []

    async def member(index: int) -> None:
        group.append(await runner_a.run_rollout(a, toolsets, group_index=index))

    async with anyio.create_task_group() as tg:
        for index in range(2):
            tg.start_soon(member, index)
    assert [r.score.reward for r in group if r.score] == [1.0, 1.0]
    assert len({r.metadata["attempts"] for r in group}) == 1
    wrong = RolloutRunner(env, pool, oracle_agent("echo 0 > total.txt"), toolsets)
    bad = await wrong.run_rollout(b, toolsets)
    assert bad.score is not None
    assert bad.score.reward == 0.0


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_a_slot_that_cannot_be_read_is_never_a_zero_reward(
    family: str, make_pool: Any
) -> None:
    env = EndlessTerminalsEnv(EndlessTerminalsConfig(families=(family,)))
    item = next(env.items(seed=3))
    dead = await make_pool(doomed=1, die_after_ops=0).acquire("dead")
    result = AgentResult(messages=[], stop_reason=StopReason.FINAL_ANSWER, turns=0)
    with pytest.raises(SandboxError, match="host is gone"):
        await env.verify(item, result, SlotRewardContext(dead, {}))
