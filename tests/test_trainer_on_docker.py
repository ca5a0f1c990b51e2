"""The trainer's live source on ``--sandbox docker``: one step's group sampled by the embedded
model with its sandboxes in Docker containers (the tasks image ``.ci/docker.sh`` builds), and
no container left once the source closes. The update does not touch sandboxes, so no weights
load here; ``--sandbox-image`` without ``--sandbox docker`` is checked by
apps/trainer/tests/test_cli_errors.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

pytest.importorskip("hermes_trainer")  # its own dependencies: see docs/testing.md

from hermes_sandbox.backends.docker import POOL_LABEL
from hermes_trainer.config import TrainConfig
from hermes_trainer.live import live_environment, open_live

from .test_env_backends import NO_DOCKER, TASKS_IMAGE

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(NO_DOCKER is not None, reason=f"docker: {NO_DOCKER}"),
]

GROUP = 2
SEED = 7  # the pool is named trainer-<seed>: no other test's


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _containers() -> list[str]:
    done = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={POOL_LABEL}=trainer-{SEED}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.split()


async def test_a_step_of_the_live_source_samples_its_group_in_docker(tmp_path: Path) -> None:
    config = TrainConfig(
        output=tmp_path,
        groups_per_step=1,
        group_size=GROUP,
        max_turns=1,
        max_tokens=16,
        seed=SEED,
        sandbox="docker",
        sandbox_image=TASKS_IMAGE,
    )
    seen: set[str] = set()
    environment = live_environment(config)
    async with (
        open_live(config, environment=environment) as source,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_watch, seen)
        collected = await source.collect(1)
        tg.cancel_scope.cancel()
    assert seen, "no sandbox container ran"
    [group] = collected.groups
    assert len(group) == GROUP
    assert (collected.generated_tokens or 0) > 0
    assert _containers() == [], "a container outlived the closed source"
    records = (tmp_path / "rollouts" / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(r)["step"] for r in records] == [1] * GROUP  # the run's rollout log


async def _watch(seen: set[str]) -> None:
    while True:
        seen.update(await anyio.to_thread.run_sync(_containers))
        await anyio.sleep(0.2)
