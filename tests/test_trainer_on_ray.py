"""The trainer's live source on ``--sandbox ray``, on the session's live Ray cluster (the root
conftest's ``ray_cluster``): one step's group sampled by the embedded model with its
sandboxes as Ray actors on the cluster, released when the source closes. The update does not
touch sandboxes, so no weights load here; the command line's mapping onto these options is
checked by apps/trainer/tests/test_cli_errors.py (``--sandbox ray`` without its cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("hermes_trainer")  # its own dependencies: see docs/testing.md

from hermes_trainer.config import TrainConfig
from hermes_trainer.live import live_environment, open_live

from .test_apps_on_ray import actor_nodes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

GROUP = 2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_step_of_the_live_source_samples_its_group_on_ray(
    ray_cluster: Any, tmp_path: Path
) -> None:
    config = TrainConfig(
        output=tmp_path,
        groups_per_step=1,
        group_size=GROUP,
        max_turns=1,
        max_tokens=16,
        sandbox="ray",
        ray_address=ray_cluster.address,
        ray_python=ray_cluster.python,
    )
    nodes: set[str] = set()
    environment = live_environment(config)
    async with (
        open_live(config, environment=environment) as source,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_watch, ray_cluster, nodes)
        collected = await source.collect(1)
        tg.cancel_scope.cancel()
    assert nodes, "no sandbox host actor ran on the cluster"
    assert nodes <= set(ray_cluster.raylets())
    [group] = collected.groups
    assert len(group) == GROUP
    assert collected.generated_tokens > 0
    for _ in range(120):  # Ray ends a killed actor's process within seconds
        if not actor_nodes(ray_cluster):
            break
        await anyio.sleep(0.5)
    assert actor_nodes(ray_cluster) == set(), "a host actor outlived the closed source"
    records = (tmp_path / "rollouts" / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(r)["step"] for r in records] == [1] * GROUP  # the run's rollout log


async def _watch(cluster: Any, nodes: set[str]) -> None:
    while True:
        nodes |= actor_nodes(cluster)
        await anyio.sleep(0.2)
