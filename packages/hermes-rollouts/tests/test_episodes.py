"""Episodes driven from outside (what the TRL adapter stands on), on real bwrap slots: a tool
call runs in the episode's own workspace, ``finish`` is our verifier's reward, a setup that
failed is an infrastructure failure with no reward, and aborted or finished episodes leave no
host, mount or process once closed."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest
from hermes_rollouts import (
    EnvironmentSpec,
    PoolSpec,
    RolloutSpec,
    SandboxSpec,
    ToolsetSpec,
    blocking_episodes,
)
from hermes_rollouts.leaks import Snapshot, leftovers
from hermes_sandbox.factory import build_backend

pytestmark = pytest.mark.slow

BROKEN_ENV = '''
from hermes_protocols import Item, Message, SandboxError


class BrokenSetup:
    """Every workspace setup fails: the sandbox's fault, never the model's."""

    name = "broken_setup"
    toolsets = ("terminal",)

    def items(self, *, seed, split="train"):
        yield Item(id=f"broken-{split}-{seed}", data={}, split=split)

    def prompt(self, item):
        return [Message.user("Write ok to out.txt.")]

    async def setup_workspace(self, item, slot):
        raise SandboxError("the host went away")

    async def verify(self, item, result, ctx):
        raise AssertionError("never verified")
'''


def spec(environment: EnvironmentSpec, pool: str) -> RolloutSpec:
    return RolloutSpec(
        sandbox=SandboxSpec(kind="bwrap"),
        pool=PoolSpec(name=pool),
        environment=environment,
        toolsets=ToolsetSpec(enabled=["terminal"]),
    )


def no_leftovers(pool: str, before: Snapshot) -> list[str]:
    return anyio.run(leftovers, build_backend(SandboxSpec(kind="bwrap")), pool, before)


def test_an_episode_runs_tools_in_its_own_workspace_and_is_judged_by_our_verifier() -> None:
    pool = f"episodes-{uuid.uuid4().hex[:8]}"
    before = Snapshot.take()
    write_word = EnvironmentSpec(
        name="endless_terminals", options={"families": ["write_word"], "difficulties": [1]}
    )
    with blocking_episodes(spec(write_word, pool), timeout_s=120) as episodes:
        item = next(iter(episodes.host.environment.items(seed=0)))
        assert [s.name for s in episodes.host.tool_schemas] == ["terminal"]
        assert episodes.host.prompt(item)[-1].role == "user"
        first, second = episodes.start(item, seed=1), episodes.start(item, seed=2)
        episodes.call(first, "terminal", {"command": "echo mine > only_here.txt"})
        listing = episodes.call(second, "terminal", {"command": "ls"})
        assert "only_here.txt" not in listing  # each episode has a slot of its own
        outcome = episodes.finish(first)
        assert (outcome.reward, outcome.infrastructure, outcome.turns) == (0.0, None, 1)
        open_when_closed = episodes.start(item, seed=3)
        assert open_when_closed is not None
    assert no_leftovers(pool, before) == []


def test_a_setup_that_failed_has_no_reward(tmp_path: Path) -> None:
    source = tmp_path / "broken.py"
    source.write_text(BROKEN_ENV)
    pool = f"episodes-{uuid.uuid4().hex[:8]}"
    before = Snapshot.take()
    broken = EnvironmentSpec(name=f"{source}:BrokenSetup")
    with blocking_episodes(spec(broken, pool), timeout_s=120) as episodes:
        item = next(iter(episodes.host.environment.items(seed=0)))
        outcome = episodes.finish(episodes.start(item, seed=1))
    assert outcome.reward is None
    assert outcome.infrastructure is not None
    assert "the host went away" in outcome.infrastructure
    assert no_leftovers(pool, before) == []
