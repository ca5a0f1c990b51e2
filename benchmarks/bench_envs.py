"""hermes-envs: rollout-runner overhead and real endless_terminals rollouts on bwrap.

1. Overhead: 2,000 rollouts (concurrency 200) of a no-op environment on an in-memory pool with
   an agent that returns at once, through ``RolloutRunner.run_rollout`` in a task group versus
   a hand-written baseline doing the same acquire/setup/agent/verify/release calls in one.
2. Real rollouts: oracle rollouts of every endless_terminals family on the bwrap pool with the
   real terminal tool; the runner's own share is the wall time not spent in a phase.
"""

from __future__ import annotations

import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from hermes_envs import EndlessTerminalsEnv, RolloutRunner, RunnerConfig
from hermes_protocols import (
    AgentResult,
    ExecResult,
    Item,
    Message,
    PoolStats,
    RewardContext,
    Score,
    ScoredRollout,
    Slot,
    StopReason,
    ToolExecutor,
    ToolSchema,
)
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.tools import default_toolsets

from benchmarks.report import write_section

COMMAND = "uv run --frozen --no-sync python -m benchmarks envs"
ROLLOUTS = 2000
CONCURRENCY = 200
REPEATS = 5


class _MemSlot:
    def __init__(self, index: int) -> None:
        self.slot_id = f"mem{index}"
        self.workspace = "/mem"
        self.files: dict[str, bytes] = {}

    async def exec(self, command: str, *, timeout: float, **_: Any) -> ExecResult:
        return ExecResult(0, "")

    async def read_file(self, path: str) -> bytes:
        return self.files[path]

    async def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data


class _MemPool:
    def __init__(self, size: int) -> None:
        self._free = [_MemSlot(i) for i in range(size)]
        self._ready = anyio.Semaphore(size)

    async def __aenter__(self) -> _MemPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def acquire(self, trajectory_id: str, *, timeout: float | None = None) -> Slot:
        await self._ready.acquire()
        return self._free.pop()

    async def release(self, slot: Slot, *, reset: bool = True) -> None:
        assert isinstance(slot, _MemSlot)
        slot.files.clear()
        self._free.append(slot)
        self._ready.release()

    def stats(self) -> PoolStats:
        return PoolStats(1, 0, 0, 0)


class _NoopEnv:
    name = "noop"
    toolsets = ("terminal",)

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        for n in itertools.count():
            yield Item(f"i{n}", {"n": n})

    def prompt(self, item: Item) -> Sequence[Message]:
        return [Message.user("hi")]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        await slot.write_file("x", b"1")
        return {}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        return Score(reward=float(await ctx.read_file("x") == b"1"))


class _InstantAgent:
    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        return AgentResult(messages=messages, stop_reason=StopReason.FINAL_ANSWER, turns=1)


class _Toolset:
    name = "terminal"
    tools: tuple[Any, ...] = ()


async def _runner_once() -> float:
    env, pool = _NoopEnv(), _MemPool(CONCURRENCY)
    toolsets = [_Toolset()]
    runner = RolloutRunner(env, pool, _InstantAgent(), toolsets)
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    rewards: list[float] = []

    async def one(item: Item) -> None:
        async with limiter:
            rollout = await runner.run_rollout(item, toolsets)
        assert rollout.score is not None
        rewards.append(rollout.score.reward)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for item in itertools.islice(env.items(seed=0), ROLLOUTS):
            tg.start_soon(one, item)
    elapsed = time.perf_counter() - start
    assert rewards == [1.0] * ROLLOUTS
    return elapsed


async def _baseline_once() -> float:
    env, pool, agent = _NoopEnv(), _MemPool(CONCURRENCY), _InstantAgent()
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    rewards: list[float] = []

    async def one(item: Item) -> None:
        async with limiter:
            slot = await pool.acquire(item.id)
            try:
                await env.setup_workspace(item, slot)
                result = await agent.run(env.prompt(item), tools=[], executor=None)  # type: ignore[arg-type]
                score = await env.verify(item, result, slot)  # type: ignore[arg-type]
                rewards.append(score.reward)
            finally:
                await pool.release(slot)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for item in itertools.islice(env.items(seed=0), ROLLOUTS):
            tg.start_soon(one, item)
    elapsed = time.perf_counter() - start
    assert len(rewards) == ROLLOUTS
    return elapsed


class _OracleAgent:
    def __init__(self, scripts: dict[str, str]) -> None:
        self.scripts = scripts

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        await executor("terminal", {"command": self.scripts[str(messages[-1].content)]})
        return AgentResult(messages=messages, stop_reason=StopReason.FINAL_ANSWER, turns=1)


async def _bwrap_rollouts(root: Path) -> list[ScoredRollout]:
    env = EndlessTerminalsEnv()
    items = list(itertools.islice(env.items(seed=0), 56))
    out: list[ScoredRollout] = []
    backend = BwrapBackend(BwrapConfig(root_dir=str(root)))
    async with SandboxPool(
        backend, PoolConfig(name="benchenvs", slots_per_host=4, max_hosts=1)
    ) as pool:
        for item in items:  # one runner per item: the oracle is item-specific
            agent = _OracleAgent({str(env.prompt(item)[-1].content): env.oracle_solution(item)})
            toolsets = list(default_toolsets().values())
            runner = RolloutRunner(env, pool, agent, toolsets, config=RunnerConfig())
            start = time.perf_counter()
            rollout = await runner.run_rollout(item, toolsets)
            out.append(rollout)
            rollout.metadata["wall_s"] = time.perf_counter() - start
    return out


def main() -> None:
    runner_s = [anyio.run(_runner_once) for _ in range(REPEATS)]
    base_s = [anyio.run(_baseline_once) for _ in range(REPEATS)]
    r_med, b_med = statistics.median(runner_s), statistics.median(base_s)
    per_r, per_b = r_med / ROLLOUTS * 1e6, b_med / ROLLOUTS * 1e6
    root = Path(tempfile.mkdtemp(prefix="bench-envs-"))
    try:
        rollouts = anyio.run(_bwrap_rollouts, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    solved = sum(1 for r in rollouts if r.score is not None and r.score.reward == 1.0)
    phases = {
        k: statistics.median(r.timings[k] for r in rollouts)
        for k in ("acquire_s", "setup_s", "agent_s", "verify_s", "release_s")
    }
    walls = [float(r.metadata["wall_s"]) for r in rollouts]
    own = [float(r.metadata["wall_s"]) - sum(r.timings.values()) for r in rollouts]
    body = f"""
Overhead of `RolloutRunner.run_rollout` ({ROLLOUTS} rollouts, concurrency {CONCURRENCY},
in-memory pool, no-op environment, instant agent; median of {REPEATS} runs) against a
hand-written task group doing the same calls (both in a task group, under one limiter):

| | total (s) | per rollout (us) |
|---|---|---|
| hand-written baseline | {b_med:.3f} | {per_b:.0f} |
| `RolloutRunner.run_rollout` | {r_med:.3f} | {per_r:.0f} |
| ratio runner / baseline | {r_med / b_med:.2f}x | +{per_r - per_b:.0f} us |

Real oracle rollouts of endless_terminals on the bwrap pool with the real `terminal` tool
({len(rollouts)} rollouts, 2 per family, sequential; {solved}/{len(rollouts)} scored 1.0).
Medians: wall {statistics.median(walls) * 1000:.0f} ms per rollout; acquire
{phases["acquire_s"] * 1000:.1f} ms, setup {phases["setup_s"] * 1000:.0f} ms, agent (one
terminal call) {phases["agent_s"] * 1000:.0f} ms, verify {phases["verify_s"] * 1000:.0f} ms,
release (workspace reset) {phases["release_s"] * 1000:.0f} ms; the runner's own share (wall
minus all phases) {statistics.median(own) * 1000:.2f} ms.
"""
    write_section("envs", "hermes-envs: rollout runner", COMMAND, body)


if __name__ == "__main__":
    main()
