"""Driven episodes (what the tinker-cookbook adapter stands on), on the embedded model and real
bwrap slots: an episode closed before it started never starts, so a group whose first member
failed leaves no slot behind even when a sibling's ``start`` comes after the group's cleanup
(tinker-cookbook's ``asyncio.gather`` lets the siblings of a failed rollout run on); closing a
running episode waits for its shielded work (a native ``Task.cancel()`` abandoned the slot
release's worker thread, which mounted the slot again after the pool had closed)."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest
from hermes_protocols import BackendError, ScoredRollout
from hermes_rollouts import (
    DrivenEpisode,
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
HELD = Path(__file__).with_name("held_setup.py")


def spec_of(pool: str, environment: EnvironmentSpec) -> RolloutSpec:
    return RolloutSpec(
        model=ModelSpec(context_tokens=2048),
        sandbox=SandboxSpec(kind="bwrap"),
        pool=PoolSpec(name=pool),
        environment=environment,
        toolsets=ToolsetSpec(enabled=["terminal"]),
    )


def test_an_episode_closed_before_it_started_never_takes_a_slot() -> None:
    pool = f"driven-{uuid.uuid4().hex[:8]}"
    before = Snapshot.take()
    spec = spec_of(pool, EnvironmentSpec(name=f"{BROKEN}:BrokenSetup"))

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


def test_closing_a_running_episode_waits_for_its_shielded_work(tmp_path: Path) -> None:
    pool = f"driven-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "setup"
    entered, done = anyio.Path(f"{marker}.entered"), anyio.Path(f"{marker}.done")
    before = Snapshot.take()
    environment = EnvironmentSpec(name=f"{HELD}:HeldSetup", options={"marker": str(marker)})
    spec = spec_of(pool, environment)

    async def start(episode: DrivenEpisode) -> None:
        with pytest.raises(BackendError, match="ended without a result"):
            await episode.start()

    async def close_mid_setup() -> None:
        async with open_driven_session(spec) as driven, anyio.create_task_group() as tg:
            episode = driven.episode(next(iter(driven.session.items(seed=0))), seed=0)
            tg.start_soon(start, episode)
            with anyio.fail_after(120):
                while not await entered.exists():  # noqa: ASYNC110 - a file another thread writes
                    await anyio.sleep(0.05)
            await episode.close()
            assert await done.exists(), "close() returned while the setup's worker thread still ran"
            assert not episode.running

    anyio.run(close_mid_setup)
    assert anyio.run(leftovers, build_backend(SandboxSpec(kind="bwrap")), pool, before) == []
