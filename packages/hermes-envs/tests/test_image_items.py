"""Items that bring their own image: how the runner asks for them, how terminal_bench decides
between its tasks' images and the sandbox's userland, and which verifier failures are
infrastructure (real docker runs are in tests/test_docker_terminal_bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hermes_envs import RolloutRunner, RunnerConfig, with_system_prompt
from hermes_envs.acquire import acquire_slot
from hermes_envs.terminal_bench import TerminalBenchConfig, TerminalBenchEnv, sample_task_dirs
from hermes_protocols import (
    ConfigError,
    FailureKind,
    ImageEnvironment,
    SandboxError,
    Slot,
    SlotImage,
)

from .conftest import LocalPool

pytestmark = pytest.mark.anyio
CONFIG = RunnerConfig(max_attempts=1, retry_delay_s=0.0)


class ImagePool(LocalPool):
    """A local pool that records the images asked for; ``runs`` says whether it claims to run
    them (it cannot: every image request fails like an image that cannot be had)."""

    def __init__(self, root: Path, *, runs: bool = True) -> None:
        super().__init__(root)
        self.runs = runs
        self.images: list[SlotImage] = []

    @property
    def runs_images(self) -> bool:
        return self.runs

    async def acquire_image(
        self, trajectory_id: str, image: SlotImage, *, timeout: float | None = None
    ) -> Slot:
        self.images.append(image)
        raise SandboxError(f"image {image.name or 'built'} cannot be had here")


def _sample(name: str) -> Path:
    return next(p for p in sample_task_dirs() if p.name == name)


def _env(*dirs: Path, host_userland: bool | None = None) -> TerminalBenchEnv:
    config = TerminalBenchConfig(
        task_dirs=tuple(map(str, dirs)), include_samples=False, host_userland=host_userland
    )
    return TerminalBenchEnv(config)


async def test_the_runner_asks_the_pool_for_each_tasks_own_image(
    tmp_path: Path, toolsets: Any, idle_agent: Any
) -> None:
    pool = ImagePool(tmp_path)
    env = _env(_sample("word-count"))
    [item] = list(env.items(seed=0))
    runner = RolloutRunner(env, pool, idle_agent, toolsets, config=CONFIG)
    assert isinstance(runner.env, TerminalBenchEnv)
    assert not runner.env.host_userland  # decided by the pool: it runs images
    rollout = await runner.run_rollout(item, toolsets)
    files = dict(pool.images[0].build_context)
    assert (pool.images[0].name, pool.images[0].workdir) == (None, "/app")
    assert files["Dockerfile"].startswith(b"FROM ubuntu:24.04\n")
    assert b"quick brown fox" in files["essay.txt"]
    assert pool.images[0].build_timeout_s == 300.0
    assert rollout.failure is not None
    assert (rollout.failure.kind, rollout.failure.phase) == (FailureKind.INFRASTRUCTURE, "acquire")
    assert "cannot be had" in rollout.failure.message


async def test_a_task_without_any_image_fails_as_infrastructure(
    tmp_path: Path, toolsets: Any, idle_agent: Any
) -> None:
    task = tmp_path / "bare"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("x")
    (task / "task.toml").write_text("")
    (task / "tests" / "test.sh").write_text("true\n")
    pool = ImagePool(tmp_path / "slots")
    runner = RolloutRunner(_env(task), pool, idle_agent, toolsets, config=CONFIG)
    rollout = await runner.run_rollout(next(_env(task).items(seed=0)), toolsets)
    assert rollout.failure is not None
    assert rollout.failure.kind is FailureKind.INFRASTRUCTURE
    assert "task 'bare' has no image" in rollout.failure.message
    assert pool.images == []


async def test_without_images_tasks_run_in_the_sandboxs_userland_unless_told_otherwise(
    tmp_path: Path, toolsets: Any, idle_agent: Any
) -> None:
    for pool in (LocalPool(tmp_path / "a"), ImagePool(tmp_path / "b", runs=False)):
        runner = RolloutRunner(_env(_sample("word-count")), pool, idle_agent, toolsets)
        assert isinstance(runner.env, TerminalBenchEnv)
        assert runner.env.host_userland
        with pytest.raises(ConfigError, match=r"host_userland=false .* \(docker\)"):
            RolloutRunner(
                _env(_sample("word-count"), host_userland=False), pool, idle_agent, toolsets
            )
    pool = ImagePool(tmp_path / "c")
    env = _env(_sample("word-count"), host_userland=True)
    assert (
        RolloutRunner(env, pool, idle_agent, toolsets).env.image_for(  # type: ignore[attr-defined]
            next(env.items(seed=0))
        )
        is None
    )


async def test_wrapped_environments_forward_their_images(tmp_path: Path) -> None:
    wrapped = with_system_prompt(_env(_sample("collect-errors")), "Be brief.")
    assert isinstance(wrapped, ImageEnvironment)
    item = next(wrapped.items(seed=0))
    assert wrapped.image_for(item) is None
    set_up = wrapped.for_sandbox(runs_images=True)
    assert isinstance(set_up, ImageEnvironment)
    image = set_up.image_for(item)
    assert image is not None
    assert image.workdir == "/app"
    assert set_up.prompt(item)[0].content == "Be brief."
    assert "/app/logs/" in str(set_up.prompt(item)[1].content)  # not remapped: its own image


async def test_a_verifier_that_cannot_start_a_command_is_infrastructure(
    tmp_path: Path, pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    """Exit 127 (command not found) with no reward file: the verifier did not run."""
    task = tmp_path / "needs-tool"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Write ok into /app/ok.txt.")
    (task / "task.toml").write_text("")
    (task / "tests" / "test.sh").write_text("hermes-no-such-interpreter /tests/check.hx\n")
    env = _env(task)
    [item] = list(env.items(seed=0))
    runner = RolloutRunner(env, pool, oracle_agent("echo ok > ok.txt"), toolsets, config=CONFIG)
    rollout = await runner.run_rollout(item, toolsets)
    assert rollout.score is None, rollout.score
    assert rollout.failure is not None
    assert (rollout.failure.kind, rollout.failure.phase) == (FailureKind.INFRASTRUCTURE, "verify")
    assert "test.sh could not run (exit 127)" in rollout.failure.message
    assert "hermes-no-such-interpreter" in rollout.failure.message


async def test_an_image_for_a_pool_that_cannot_run_any_is_a_config_error(tmp_path: Path) -> None:
    env = _env(_sample("word-count"), host_userland=False)  # not set up for the pool
    item = next(env.items(seed=0))
    with pytest.raises(ConfigError, match=r"runs in its own image.*docker"):
        await acquire_slot(env, LocalPool(tmp_path), item, "t", timeout=1)
