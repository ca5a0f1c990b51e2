"""hermes-envs on the real bwrap slot pool with the real hermes-sandbox tools.

For every shipped environment and every task family / fixture / sample task: a scripted oracle
agent (the task's oracle solution through the real ``terminal`` tool) scores 1.0 and a
do-nothing agent scores 0.0. Inside bwrap the host's home is hidden, so ``python3`` and ``git``
come from the system directories the sandbox exposes.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hermes_envs import (
    EndlessTerminalsConfig,
    EndlessTerminalsEnv,
    HasOracle,
    RolloutRunner,
    RunnerConfig,
    SweSmithConfig,
    SweSmithOracleEnv,
    TerminalBenchEnv,
)
from hermes_envs.endless import FAMILIES
from hermes_envs.swe_smith import FIXTURES
from hermes_envs.terminal_bench import sample_task_dirs
from hermes_protocols import (
    AgentResult,
    Environment,
    Item,
    Message,
    StopReason,
    ToolCall,
    ToolExecutor,
    ToolSchema,
)
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.tools import default_toolsets

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
CONFIG = RunnerConfig(max_attempts=1, retry_delay_s=0.0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def scratch() -> Any:
    root = Path("/tmp") / f"hermes-envs-bwrap-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def pool(scratch: Path) -> AsyncIterator[SandboxPool]:
    backend = BwrapBackend(BwrapConfig(root_dir=str(scratch / "hosts")))
    async with SandboxPool(backend, PoolConfig(name="envs", slots_per_host=4, max_hosts=1)) as p:
        yield p


class OracleAgent:
    """Runs the oracle script with one call of the real ``terminal`` tool."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.output = ""

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        arguments = {"command": self.script, "timeout": 300}
        result = await executor("terminal", arguments)
        self.output = result.content
        call = ToolCall("call_0", "terminal", json.dumps(arguments))
        return AgentResult(
            messages=[
                *messages,
                Message.assistant(None, (call,)),
                Message.tool(result.content, "call_0", "terminal"),
                Message.assistant("done"),
            ],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=2,
        )


class IdleAgent:
    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        return AgentResult(
            messages=[*messages, Message.assistant("nothing")],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=1,
        )


async def _check(env: Any, item: Item, pool: SandboxPool) -> None:
    oracle = OracleAgent(env.oracle_solution(item))
    assert isinstance(env, Environment)
    assert isinstance(env, HasOracle)
    toolsets = list(default_toolsets().values())
    solved = await RolloutRunner(env, pool, oracle, toolsets, config=CONFIG).run_rollout(
        item, toolsets
    )
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0, (solved.score.details, oracle.output[-2000:])
    idle = await RolloutRunner(env, pool, IdleAgent(), toolsets, config=CONFIG).run_rollout(
        item, toolsets
    )
    assert idle.score is not None, idle.failure
    assert idle.score.reward == 0.0, idle.score.details


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_endless_terminals_family(family: str, pool: SandboxPool) -> None:
    env = EndlessTerminalsEnv(EndlessTerminalsConfig(families=(family,)))
    await _check(env, next(env.items(seed=13)), pool)


@pytest.mark.parametrize("instance", FIXTURES, ids=lambda f: f.instance_id)
async def test_swe_smith_fixture(instance: Any, pool: SandboxPool, scratch: Path) -> None:
    env = SweSmithOracleEnv(SweSmithConfig(cache_dir=str(scratch / "swe-cache")))
    item = next(i for i in env.items(seed=0) if i.id == instance.instance_id)
    await _check(env, item, pool)


@pytest.mark.parametrize("task", [p.name for p in sample_task_dirs()])
async def test_terminal_bench_sample(task: str, pool: SandboxPool) -> None:
    env = TerminalBenchEnv()
    item = next(i for i in env.items(seed=0) if i.id == task)
    await _check(env, item, pool)
