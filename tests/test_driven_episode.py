"""Driven episodes (what the tinker-cookbook adapter stands on), on the embedded model and real
bwrap slots: an episode closed before it started never starts, so a group whose first member
failed leaves no slot behind even when a sibling's ``start`` comes after the group's cleanup
(tinker-cookbook's ``asyncio.gather`` lets the siblings of a failed rollout run on)."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest
from hermes_protocols import BackendError, ScoredRollout
from hermes_rollouts import (
    EnvironmentSpec,
    InfrastructureFailure,
    ModelSpec,
    PoolSpec,
    RolloutSpec,
    SandboxSpec,
    ToolsetSpec,
    judged_reward,
    open_driven_session,
)
from hermes_rollouts.leaks import Snapshot, leftovers
from hermes_sandbox.factory import build_backend

pytestmark = pytest.mark.slow


BROKEN = Path(__file__).with_name("broken_setup.py")


def test_an_episode_closed_before_it_started_never_takes_a_slot() -> None:
    pool = f"driven-{uuid.uuid4().hex[:8]}"
    before = Snapshot.take()
    spec = RolloutSpec(
        model=ModelSpec(context_tokens=2048),
        sandbox=SandboxSpec(kind="bwrap"),
        pool=PoolSpec(name=pool),
        environment=EnvironmentSpec(name=f"{BROKEN}:BrokenSetup"),
        toolsets=ToolsetSpec(enabled=["terminal"]),
    )

    async def group() -> None:
        async with open_driven_session(spec) as driven:
            item = next(iter(driven.session.items(seed=0)))
            failed, sibling = (driven.episode(item, seed=s, group_index=s) for s in (0, 1))
            found = await failed.start()
            assert isinstance(found, ScoredRollout)
            with pytest.raises(InfrastructureFailure, match="the host went away"):
                judged_reward(found)
            for episode in (failed, sibling):  # the group's cleanup, before the sibling starts
                await episode.close()
            with pytest.raises(BackendError, match="closed before it started"):
                await sibling.start()
            assert not sibling.running

    anyio.run(group)
    assert anyio.run(leftovers, build_backend(SandboxSpec(kind="bwrap")), pool, before) == []
