"""One terminal_bench task with ``host_userland=False`` on real docker slots (issue 15).

The task's image is built offline: ``FROM`` the debootstrap base of ``.ci/docker.sh`` plus the
task's environment files in ``/app`` (no registry). An integration test across packages (it
needs hermes_envs): skipped when the daemon or the base image is missing.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import anyio
import pytest
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import (
    POOL_LABEL,
    DockerBackend,
    DockerConfig,
    docker_available,
)
from hermes_sandbox.tools import terminal_toolset

from .test_envs_on_bwrap import OracleAgent

BASE_IMAGE = "hermes-sandbox-base:bookworm-minbase"


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def _docker_reason() -> str | None:
    reason = anyio.run(docker_available)
    if reason is None and _docker("image", "inspect", BASE_IMAGE).returncode != 0:
        reason = f"image {BASE_IMAGE} is missing; run .ci/docker.sh to build it offline"
    return reason


NO_DAEMON = _docker_reason()

tb = pytest.importorskip("hermes_envs.terminal_bench")
envs = pytest.importorskip("hermes_envs")
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}"),
]

TASK = "word-count"


def _build_task_image(task: object, context: Path, tag: str) -> None:
    app = context / "app"
    for name, data in task.environment_files.items():  # type: ignore[attr-defined]
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_bytes(data)
    (context / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nCOPY app/ /app/\nWORKDIR /app\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True)


async def test_a_terminal_bench_task_in_its_own_image(tmp_path: Path) -> None:
    env = tb.TerminalBenchEnv(tb.TerminalBenchConfig(host_userland=False))
    item = next(i for i in env.items(seed=0) if i.id == TASK)
    tag = f"hermes-tb-{TASK}:{uuid.uuid4().hex[:8]}"
    name = f"tb-{uuid.uuid4().hex[:6]}"
    await anyio.to_thread.run_sync(_build_task_image, env.task(item), tmp_path, tag)
    try:
        # Each trajectory needs the image as built (/app is outside the slot workspace).
        backend = DockerBackend(DockerConfig(image=tag, fresh_container_on_reset=True))
        async with SandboxPool(backend, PoolConfig(name=name, slots_per_host=1)) as pool:
            runner = envs.RolloutRunner(
                env, pool, OracleAgent(env.oracle_solution(item)), [terminal_toolset()]
            )
            [solved] = await runner.run_group(item)
            assert solved.score is not None, solved.failure
            assert solved.score.reward == 1.0, solved.score.details
            idle = envs.RolloutRunner(env, pool, OracleAgent("true"), [terminal_toolset()])
            [unsolved] = await idle.run_group(item)
            assert unsolved.score is not None, unsolved.failure
            assert unsolved.score.reward == 0.0  # the first run's /app/count.txt is gone
        left = await anyio.to_thread.run_sync(
            _docker, "ps", "-aq", "--filter", f"label={POOL_LABEL}={name}"
        )
        assert left.stdout.split() == []
    finally:
        await anyio.to_thread.run_sync(_docker, "rmi", "-f", tag)
    images = await anyio.to_thread.run_sync(_docker, "images", "-q", tag)
    assert images.stdout.strip() == ""
