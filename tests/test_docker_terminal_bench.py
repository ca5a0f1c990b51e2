"""terminal_bench tasks in their own images on real docker: the image a task names in task.toml,
a verifier that cannot run, an image that cannot be had (issue 23).

Task directories are written to ``tmp_path`` in Harbor's layout; images come from the offline
base and tasks images of ``.ci/docker.sh`` (skipped when the daemon or an image is missing).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hermes_envs import RolloutRunner, RunnerConfig
from hermes_envs.terminal_bench import TerminalBenchConfig, TerminalBenchEnv
from hermes_protocols import FailureKind, ScoredRollout
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import DockerBackend, DockerConfig
from hermes_sandbox.tools import default_toolsets

from .test_env_backends import NO_DOCKER, TASKS_IMAGE, _containers
from .test_envs_on_bwrap import IdleAgent, OracleAgent

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(NO_DOCKER is not None, reason=f"docker: {NO_DOCKER}"),
]
BASE_IMAGE = "hermes-sandbox-base:bookworm-minbase"  # no python3
CONFIG = RunnerConfig(max_attempts=2, retry_delay_s=0.0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    name = f"tbimg-{uuid.uuid4().hex[:8]}"
    async with SandboxPool(DockerBackend(DockerConfig()), PoolConfig(name=name)) as started:
        yield started
    assert _containers(name) == []


def _task(root: Path, name: str, *, toml_image: str | None, dockerfile: str | None) -> Path:
    """A task: write ``hello`` to /app/hello.txt; test.sh checks it with python3."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("Write the word hello into /app/hello.txt.\n")
    image = f'docker_image = "{toml_image}"\n' if toml_image else ""
    (task / "task.toml").write_text(f"[verifier]\ntimeout_sec = 60.0\n[environment]\n{image}")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\npython3 -c \"import sys; sys.exit(open('/app/hello.txt').read() != "
        "'hello\\n')\"\n"
    )
    (task / "solution" / "solve.sh").write_text("echo hello > /app/hello.txt\n")
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    return task


async def _run(task: Path, pool: SandboxPool, agent: object) -> ScoredRollout:
    env = TerminalBenchEnv(TerminalBenchConfig(task_dirs=(str(task),), include_samples=False))
    [item] = list(env.items(seed=0))
    toolsets = list(default_toolsets().values())
    runner = RolloutRunner(env, pool, agent, toolsets, config=CONFIG)  # type: ignore[arg-type]
    return await runner.run_rollout(item, toolsets)


async def test_the_image_task_toml_names_is_run_with_the_workspace_at_app(
    tmp_path: Path, pool: SandboxPool
) -> None:
    task = _task(tmp_path, "named", toml_image=TASKS_IMAGE, dockerfile="FROM no-such:1\n")
    solved = await _run(task, pool, OracleAgent("echo hello > /app/hello.txt; pwd"))
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0, solved.score.details
    assert solved.metadata["workspace"]["image"] == TASKS_IMAGE  # the Dockerfile is not built
    idle = await _run(task, pool, IdleAgent())
    assert idle.score is not None, idle.failure
    assert idle.score.reward == 0.0
    assert idle.score.failure is FailureKind.MODEL


async def test_a_verifier_that_cannot_run_is_infrastructure_never_a_zero_reward(
    tmp_path: Path, pool: SandboxPool
) -> None:
    """test.sh needs python3, which the task's image lacks: exit 127 is not the model's fault."""
    task = _task(tmp_path, "nopython", toml_image=BASE_IMAGE, dockerfile=None)
    rollout = await _run(task, pool, OracleAgent("echo hello > /app/hello.txt"))
    assert rollout.score is None, rollout.score
    assert rollout.failure is not None
    assert rollout.failure.kind is FailureKind.INFRASTRUCTURE
    assert rollout.failure.phase == "verify"
    assert rollout.failure.attempts == 2
    assert "exit 127" in rollout.failure.message
    assert "python3" in rollout.failure.message


async def test_removing_app_is_the_models_failure(tmp_path: Path, pool: SandboxPool) -> None:
    """An agent that destroys the workspace cannot turn its failure into infrastructure. (``/app``
    is the slot's workspace mount: its files go, the directory stays, and test.sh fails.)"""
    task = _task(tmp_path, "rmapp", toml_image=TASKS_IMAGE, dockerfile=None)
    rollout = await _run(task, pool, OracleAgent("cd / && rm -rf /app; touch /app"))
    assert rollout.score is not None, rollout.failure
    assert rollout.score.reward == 0.0
    assert rollout.score.failure is FailureKind.MODEL
    assert "/app/hello.txt" in rollout.score.details


async def test_a_task_whose_image_cannot_be_had_fails_as_infrastructure_naming_it(
    tmp_path: Path, pool: SandboxPool
) -> None:
    missing = f"hermes-no-such-image:{uuid.uuid4().hex[:8]}"
    named = _task(tmp_path, "missing", toml_image=missing, dockerfile=None)
    rollout = await _run(named, pool, IdleAgent())
    assert rollout.score is None
    assert rollout.failure is not None
    assert (rollout.failure.kind, rollout.failure.phase) == (FailureKind.INFRASTRUCTURE, "acquire")
    assert f"image {missing!r} is not on this Docker host" in rollout.failure.message
    assert "\n" not in rollout.failure.message
    built = _task(tmp_path, "unbuildable", toml_image=None, dockerfile=f"FROM {missing}\n")
    rollout = await _run(built, pool, IdleAgent())
    assert rollout.failure is not None
    assert rollout.failure.kind is FailureKind.INFRASTRUCTURE
    assert f"(FROM {missing}) failed" in rollout.failure.message
