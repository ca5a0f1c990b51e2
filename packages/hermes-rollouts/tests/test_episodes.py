"""Episodes driven from outside (what the TRL adapter stands on), on real bwrap slots: a tool
call runs in the episode's own workspace, ``finish`` is our verifier's reward, a setup that
failed is an infrastructure failure with no reward, and aborted or finished episodes leave no
host, mount or process once closed."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("scheduled", [True, False], ids=["task-scheduled", "never-scheduled"])
def test_an_interrupt_while_an_episode_starts_still_aborts_it(scheduled: bool) -> None:
    """A ``KeyboardInterrupt`` inside ``start``, once the episode's task is scheduled or before:
    leaving the block aborts the episode before the pool closes (its slot released, nothing
    left), without waiting on a task that never began."""
    pool = f"episodes-{uuid.uuid4().hex[:8]}"
    before = Snapshot.take()
    write_word = EnvironmentSpec(
        name="endless_terminals", options={"families": ["write_word"], "difficulties": [1]}
    )
    timeout_s = 120.0
    with (  # noqa: PT012 (leaving the block is what is tested)
        pytest.raises(KeyboardInterrupt),
        blocking_episodes(spec(write_word, pool), timeout_s=timeout_s) as episodes,
    ):
        item = next(iter(episodes.host.environment.items(seed=0)))
        portal = episodes._portal
        real = portal.start_task_soon
        tasks: list[Future[Any]] = []

        def interrupted(func: Any, *args: Any, **kwargs: Any) -> Any:
            """The portal's own calls go through ``start_task_soon`` too: only the episode's
            task (a ``partial`` of its run) is interrupted, once."""
            if not isinstance(func, partial):
                return real(func, *args, **kwargs)
            del portal.start_task_soon
            if scheduled:  # and running: its slot acquired and set up
                tasks.append(real(func))
                portal.call(episodes._wait, func.args[1].started)
            raise KeyboardInterrupt

        portal.start_task_soon = interrupted  # type: ignore[method-assign,assignment]
        started = time.monotonic()
        episodes.start(item, seed=1)
    assert time.monotonic() - started < timeout_s / 4
    # aborted by the block's exit (which returns no rollout), not cancelled with the portal
    assert [task.result(timeout=0) for task in tasks] == ([None] if scheduled else [])
    assert no_leftovers(pool, before) == []
