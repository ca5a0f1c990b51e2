"""A rollout session on real components (embedded SmolLM2, the local sandbox backend): one
open, many rollouts, each sampled with the seed it is given."""

from __future__ import annotations

import pytest
from hermes_loop import ModelSpec
from hermes_rollouts import (
    AgentBudgets,
    EnvironmentSpec,
    PoolSpec,
    RolloutSpec,
    ToolsetSpec,
    open_session,
)
from hermes_sandbox.factory import SandboxSpec

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _spec(tmp_pool: str) -> RolloutSpec:
    return RolloutSpec(
        model=ModelSpec(context_tokens=2048),
        sandbox=SandboxSpec(kind="local"),
        pool=PoolSpec(name=tmp_pool, slots_per_host=2),
        environment=EnvironmentSpec(name="endless_terminals"),
        toolsets=ToolsetSpec(enabled=("terminal",)),
        budgets=AgentBudgets(max_turns=1, max_tokens_per_turn=12),
    )


async def test_one_session_runs_rollouts_and_groups_with_explicit_seeds() -> None:
    async with open_session(_spec("session-test")) as session:
        assert session.model_name.startswith("embedded:")
        assert [s.name for s in session.toolsets_for(0)] == ["terminal"]
        assert "terminal" in {t.name for t in session.tool_schemas}
        item = next(session.items(seed=0))
        first = await session.run_rollout(item, seed=11)
        again = await session.run_rollout(item, seed=11)
        other = await session.run_rollout(item, seed=12)
        group = await session.run_group(item, seed=5, group_size=2)
    assert first.result is not None
    assert again.result is not None
    assert other.result is not None
    replies = [r.result.messages[-1] for r in (first, again, other) if r.result is not None]
    assert replies[0] == replies[1]  # same seed, same sample: the seed reached the sampler
    assert first.result.trace == again.result.trace
    assert [r.group_index for r in group] == [0, 1]
    assert all(r.failure is None for r in (first, again, other, *group))
