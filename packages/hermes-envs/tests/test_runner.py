"""The rollout runner: phases, retries, timeouts, groups, toolsets, streaming, cancellation."""

from __future__ import annotations

import contextlib
import functools
import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from hermes_envs import (
    EndlessTerminalsConfig,
    EndlessTerminalsEnv,
    RolloutRunner,
    RunnerConfig,
    ToolsetDistribution,
    ToolsetSelection,
)
from hermes_protocols import (
    AgentResult,
    ConfigError,
    FailureKind,
    Item,
    Message,
    RewardContext,
    SandboxError,
    Score,
    ScoredRollout,
    StopReason,
    ToolExecutor,
    ToolResult,
    ToolSchema,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.anyio
FAST = RunnerConfig(retry_delay_s=0.0, max_attempts=3)


def _env() -> EndlessTerminalsEnv:
    return EndlessTerminalsEnv(EndlessTerminalsConfig(families=("sort_unique",)))


def _item(env: EndlessTerminalsEnv, n: int = 0) -> Item:
    return next(itertools.islice(env.items(seed=1), n, None))


@pytest.mark.parametrize("catch", [False, True], ids=["agent-raises", "loop-reports"])
async def test_slot_dying_mid_rollout_is_retried(
    catch: bool, make_pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _env()
    item = _item(env)
    # sort_unique setup is one write_file; the slot dies on the agent's first command.
    pool = make_pool(size=2, doomed=1, die_after_ops=1)
    agent = oracle_agent(env.oracle_solution(item), catch_tool_errors=catch)
    rollout = await RolloutRunner(env, pool, agent, toolsets, config=FAST).run_rollout(
        item, toolsets
    )
    assert rollout.failure is None
    assert rollout.score is not None
    assert rollout.score.reward == 1.0
    assert rollout.metadata["attempts"] == 2
    assert pool.acquires == 2
    assert len(pool.released) == 2
    assert not pool.busy


async def test_persistent_infrastructure_failure_is_reported_not_scored(
    make_pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _env()
    item = _item(env)
    pool = make_pool(size=2, doomed=10, die_after_ops=1)
    agent = oracle_agent(env.oracle_solution(item), catch_tool_errors=True)
    rollout = await RolloutRunner(env, pool, agent, toolsets, config=FAST).run_rollout(
        item, toolsets
    )
    assert rollout.score is None
    assert rollout.result is None
    assert rollout.failure is not None
    assert rollout.failure.kind is FailureKind.INFRASTRUCTURE
    assert rollout.failure.phase == "agent"
    assert rollout.failure.attempts == 3
    assert "host is gone" in rollout.failure.message
    assert not pool.busy


class _HangingVerifier(EndlessTerminalsEnv):
    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        await ctx.exec("sleep 60", timeout=120)
        return Score(reward=1.0)


async def test_hanging_verifier_hits_its_timeout(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _HangingVerifier(EndlessTerminalsConfig(families=("sort_unique",)))
    item = _item(env)
    config = RunnerConfig(verify_timeout=0.5, max_attempts=2, retry_delay_s=0.0)
    runner = RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets, config=config
    )
    start = anyio.current_time()
    rollout = await runner.run_rollout(item, toolsets)
    assert anyio.current_time() - start < 20
    assert rollout.failure is not None
    assert rollout.failure.phase == "verify"
    assert "PhaseTimeout" in rollout.failure.message
    assert rollout.failure.attempts == 2
    assert not pool.busy


class _FailingVerifier(EndlessTerminalsEnv):
    """``verify`` raises ``error`` (after checking the workspace, as a real verifier would)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(EndlessTerminalsConfig(families=("sort_unique",)))
        self.error = error
        self.calls = 0

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        self.calls += 1
        await ctx.exec("true", timeout=10)
        raise self.error


async def test_a_bug_in_verify_fails_the_run_loudly(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _FailingVerifier(ValueError("bad reward arithmetic"))
    item = _item(env)
    runner = RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets, config=FAST
    )
    with pytest.raises(ValueError, match="bad reward arithmetic"):
        await runner.run_rollout(item, toolsets)
    assert env.calls == 1  # not retried
    assert not pool.busy  # the slot is released all the same


async def test_a_sandbox_error_in_verify_is_retried_then_reported(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _FailingVerifier(SandboxError("the host died"))
    item = _item(env)
    runner = RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets, config=FAST
    )
    rollout = await runner.run_rollout(item, toolsets)
    assert env.calls == 3
    assert rollout.score is None
    assert rollout.failure is not None
    assert rollout.failure.kind is FailureKind.INFRASTRUCTURE
    assert (rollout.failure.phase, rollout.failure.attempts) == ("verify", 3)
    assert "SandboxError: the host died" in rollout.failure.message
    assert not pool.busy


async def test_acquire_timeout_is_an_infrastructure_failure(
    make_pool: Any, toolsets: Any, idle_agent: Any
) -> None:
    env = _env()
    pool = make_pool(size=1)
    held = await pool.acquire("holder")
    config = RunnerConfig(acquire_timeout=0.2, max_attempts=2, retry_delay_s=0.0)
    rollout = await RolloutRunner(env, pool, idle_agent, toolsets, config=config).run_rollout(
        _item(env), toolsets
    )
    await pool.release(held)
    assert rollout.failure is not None
    assert rollout.failure.phase == "acquire"


class _BackendDownAgent:
    def __init__(self) -> None:
        self.calls = 0
        self.seeds: list[int | None] = []

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        self.calls += 1
        self.seeds.append(seed)
        return AgentResult(
            messages=messages, stop_reason=StopReason.BACKEND_ERROR, turns=0, error="503"
        )


async def test_backend_errors_are_retried_then_reported(pool: Any, toolsets: Any) -> None:
    env = _env()
    agent = _BackendDownAgent()
    rollout = await RolloutRunner(env, pool, agent, toolsets, config=FAST).run_rollout(
        _item(env), toolsets
    )
    assert agent.calls == 3
    assert rollout.failure is not None
    assert "503" in rollout.failure.message


async def test_retries_sample_with_new_reproducible_seeds(pool: Any, toolsets: Any) -> None:
    env = _env()
    seen = []
    for _ in range(2):
        agent = _BackendDownAgent()
        runner = RolloutRunner(env, pool, agent, toolsets, config=FAST)
        await runner.run_rollout(_item(env), toolsets, seed=11)
        seen.append(agent.seeds)
    assert seen[0] == seen[1]  # reproducible
    assert seen[0][0] == 11
    assert len(set(seen[0])) == 3  # a deterministic failure is not replayed with one seed


async def test_concurrent_rollouts_use_own_slots_and_the_drawn_toolsets(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _env()
    item = _item(env)
    agent = oracle_agent(env.oracle_solution(item))
    runner = RolloutRunner(
        env,
        pool,
        agent,
        toolsets,
        distributions={"mostly": ToolsetDistribution("mostly", {"terminal": 100, "file": 50})},
    )
    chosen = runner.resolve_toolsets(ToolsetSelection(distribution="mostly"), seed=9)
    assert chosen == runner.resolve_toolsets(ToolsetSelection(distribution="mostly"), seed=9)
    group: list[ScoredRollout] = []

    async def member(index: int) -> None:
        group.append(await runner.run_rollout(item, chosen, group_index=index))

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(member, index)
    assert sorted(r.group_index for r in group) == [0, 1, 2]
    assert all(r.score is not None and r.score.reward == 1.0 for r in group)
    assert len(set(agent.seen_tools)) == 1
    assert pool.acquires == 3
    assert len({r.id for r in group}) == 3


async def test_explicit_toolsets_and_disabled(pool: Any, toolsets: Any, oracle_agent: Any) -> None:
    env = _env()
    runner = RolloutRunner(env, pool, oracle_agent("true"), toolsets)
    assert [t.name for t in runner.resolve_toolsets(ToolsetSelection(), seed=0)] == [
        "terminal",
        "file",
    ]
    only = runner.resolve_toolsets(ToolsetSelection(enabled=["terminal"]), seed=0)
    assert [t.name for t in only] == ["terminal"]
    rest = runner.resolve_toolsets(ToolsetSelection(disabled=["file"]), seed=0)
    assert [t.name for t in rest] == ["terminal"]
    with pytest.raises(ConfigError, match="unknown toolset"):
        runner.resolve_toolsets(ToolsetSelection(enabled=["browser"]), seed=0)
    with pytest.raises(ConfigError, match="no toolset left"):
        runner.resolve_toolsets(
            ToolsetSelection(enabled=["terminal"], disabled=["terminal"]), seed=0
        )
    with pytest.raises(ConfigError, match="distribution"):
        runner.resolve_toolsets(ToolsetSelection(distribution="nope"), seed=0)
    with pytest.raises(ConfigError):
        ToolsetSelection(enabled=["terminal"], distribution="x")


@given(
    probabilities=st.dictionaries(
        st.sampled_from(["terminal", "file", "web", "browser", "vision"]),
        st.floats(0, 100),
        min_size=1,
    ),
    seed=st.integers(0, 2**32),
)
def test_distribution_sampling_is_seeded_and_never_empty(
    probabilities: Mapping[str, float], seed: int
) -> None:
    dist = ToolsetDistribution("d", probabilities)
    first = dist.sample(random.Random(seed))
    assert first == dist.sample(random.Random(seed))
    assert first
    assert set(first) <= set(probabilities)
    assert all(name in first for name, p in probabilities.items() if p == 100)


async def test_cancelling_rollouts_releases_every_slot(pool: Any, toolsets: Any) -> None:
    env = _env()
    started = anyio.Event()

    class SlowAgent:
        async def run(
            self,
            messages: Sequence[Message],
            *,
            tools: Sequence[ToolSchema],
            executor: Any,
            seed: int | None = None,
        ) -> AgentResult:
            started.set()
            await executor("terminal", {"command": "sleep 30"})
            raise AssertionError("not reached")

    runner = RolloutRunner(env, pool, SlowAgent(), toolsets)
    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(
                functools.partial(runner.run_rollout, group_index=index), _item(env), toolsets
            )
        with anyio.fail_after(10):
            await started.wait()
        await anyio.sleep(0.2)
        tg.cancel_scope.cancel()
    assert not pool.busy
    assert len(pool.released) == 3


async def test_a_rollout_uses_the_given_toolsets(
    pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = _env()
    item = _item(env)
    agent = oracle_agent(env.oracle_solution(item))
    runner = RolloutRunner(env, pool, agent, toolsets)
    rollout = await runner.run_rollout(item, [toolsets[0]])
    assert agent.seen_tools == [("terminal",)]
    assert rollout.metadata["toolsets"] == ["terminal"]
    assert set(rollout.timings) == {"acquire_s", "setup_s", "agent_s", "verify_s", "release_s"}


@pytest.mark.parametrize("command", ["cat ../../../etc/hostname", "sleep 5"])
async def test_model_caused_sandbox_errors_are_not_infrastructure(command: str, pool: Any) -> None:
    """A tool refusing a path outside the workspace or a command overrunning its timeout is
    the model's doing: the rollout is scored, not retried."""
    from hermes_envs import SlotToolExecutor
    from hermes_protocols import SandboxTimeout, Slot, ToolResult, WorkspaceEscape

    class StrictTool:
        schema = ToolSchema("terminal", "run", {"type": "object", "properties": {}})

        async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
            command = str(arguments["command"])
            if ".." in command:
                raise WorkspaceEscape("outside the workspace")
            if command.startswith("sleep"):
                raise SandboxTimeout("command overran")
            return ToolResult("")

    class OneCall:
        async def run(
            self,
            messages: Sequence[Message],
            *,
            tools: Sequence[ToolSchema],
            executor: Any,
            seed: int | None = None,
        ) -> AgentResult:
            with contextlib.suppress(Exception):
                await executor("terminal", {"command": command})
            return AgentResult(messages=messages, stop_reason=StopReason.FINAL_ANSWER, turns=1)

    class Toolset:
        name = "terminal"
        tools = (StrictTool(),)

    env = _env()
    runner = RolloutRunner(env, pool, OneCall(), [Toolset()], config=FAST)
    rollout = await runner.run_rollout(_item(env), [Toolset()])
    assert rollout.failure is None
    assert rollout.score is not None
    assert rollout.metadata["attempts"] == 1
    slot = await pool.acquire("direct")
    try:
        executor = SlotToolExecutor([Toolset()], slot)
        with pytest.raises((WorkspaceEscape, SandboxTimeout)):
            await executor("terminal", {"command": command})
        assert executor.sandbox_errors == []
    finally:
        await pool.release(slot)


async def test_the_executor_reports_unknown_tools_to_the_model_and_lets_bugs_raise(
    pool: Any, toolsets: Any
) -> None:
    from hermes_envs import SlotToolExecutor

    class Buggy:
        name = "buggy"

        class _Tool:
            schema = ToolSchema(name="buggy", description="raises", parameters={"type": "object"})

            async def __call__(self, slot: Any, arguments: Any) -> ToolResult:
                raise KeyError("a bug")

        tools = (_Tool(),)

    slot = await pool.acquire("executor")
    try:
        executor = SlotToolExecutor([*toolsets, Buggy()], slot)
        unknown = await executor("browser", {})
        assert unknown.is_error
        assert "unknown tool 'browser'" in unknown.content
        assert "terminal" in unknown.content
        ran = await executor("terminal", {"command": "echo hi"})
        assert not ran.is_error
        with pytest.raises(KeyError, match="a bug"):
            await executor("buggy", {})
    finally:
        await pool.release(slot)
