"""The worked example of docs/environments.md runs: oracle 1.0, do-nothing 0.0, registered."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hermes_envs import EnvSpec, HasOracle, RolloutRunner, default_registry
from hermes_protocols import Environment

DOC = Path(__file__).resolve().parents[3] / "docs" / "environments.md"
pytestmark = pytest.mark.anyio


def _example() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    source = blocks[0]
    assert len(source.strip().splitlines()) < 50
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace


async def test_worked_example(pool: Any, toolsets: Any, oracle_agent: Any, idle_agent: Any) -> None:
    ns = _example()
    registry = default_registry()
    registry.register(EnvSpec("reverse_words", ns["ReverseConfig"], ns["ReverseWordsEnv"]))
    env = registry.create("reverse_words", {"words": 8})
    assert isinstance(env, Environment)
    assert isinstance(env, HasOracle)
    items = list(itertools.islice(env.items(seed=0), 2))
    assert len(items[0].data["words"]) == 8
    assert items == list(itertools.islice(env.items(seed=0), 2))
    for item in items:
        solved = await RolloutRunner(
            env, pool, oracle_agent(env.oracle_solution(item)), toolsets
        ).run_rollout(item, toolsets)
        assert solved.score is not None
        assert solved.score.reward == 1.0
        idle = await RolloutRunner(env, pool, idle_agent, toolsets).run_rollout(item, toolsets)
        assert idle.score is not None
        assert idle.score.reward == 0.0
