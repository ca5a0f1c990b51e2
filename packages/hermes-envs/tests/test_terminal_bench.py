"""terminal_bench: shipped sample tasks and TB2 rows, oracle 1.0, do-nothing 0.0."""

from __future__ import annotations

import base64
import io
import json
import logging
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hermes_envs import DatasetError, RolloutRunner
from hermes_envs.terminal_bench import (
    TerminalBenchConfig,
    TerminalBenchEnv,
    load_task_dir,
    parse_row,
    sample_task_dirs,
)
from hermes_protocols import FailureKind, SlotImage

pytestmark = pytest.mark.anyio

SAMPLES = [p.name for p in sample_task_dirs()]


def test_samples_are_shipped() -> None:
    assert len(SAMPLES) >= 3
    for path in sample_task_dirs():
        task = load_task_dir(path)
        assert "test.sh" in task.test_files
        assert task.solution is not None
        assert "Dockerfile" not in task.environment_files


@pytest.mark.parametrize("name", SAMPLES)
async def test_oracle_solves_and_idle_fails(
    name: str, pool: Any, toolsets: Any, oracle_agent: Any, idle_agent: Any
) -> None:
    env = TerminalBenchEnv()
    item = next(i for i in env.items(seed=0) if i.id == name)
    solved = await RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets
    ).run_rollout(item, toolsets)
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0, solved.score.details
    unsolved = await RolloutRunner(env, pool, idle_agent, toolsets).run_rollout(item, toolsets)
    assert unsolved.score is not None, unsolved.failure
    assert unsolved.score.reward == 0.0
    assert unsolved.score.failure is FailureKind.MODEL


async def test_tests_are_not_in_the_workspace_before_verification(
    pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    env = TerminalBenchEnv()
    item = next(i for i in env.items(seed=0) if i.id == "collect-errors")
    slot = await pool.acquire("leak-check")
    try:
        with caplog.at_level(logging.WARNING):
            await env.setup_workspace(item, slot)
        assert "own userland" in caplog.text
        listing = await slot.exec("find . -type f | sort", timeout=10)
        assert "./logs/api.log" in listing.stdout
        assert "test.sh" not in listing.stdout
        assert "expected" not in listing.stdout
        leaked = await slot.exec("grep -rl 'timeout talking to db' . | sort", timeout=10)
        assert leaked.stdout.split() == ["./logs/api.log"]
    finally:
        await pool.release(slot)


def _tar_b64(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


async def test_dataset_rows_run_end_to_end(
    tmp_path: Path, pool: Any, toolsets: Any, oracle_agent: Any, idle_agent: Any
) -> None:
    row = {
        "task_id": "row-hello",
        "instruction": "Write the text 'hello tb' into /app/hello.txt.",
        "test_sh": "#!/bin/bash\ngrep -qx 'hello tb' /app/hello.txt && "
        '[ "$(cat /tests/token)" = secret ]\n',
        "tests_tar": _tar_b64({"tests/token": b"secret\n"}),
        "environment_tar": _tar_b64({"environment/Dockerfile": b"FROM x\n", "environment/a": b"1"}),
        "docker_image": "ubuntu:24.04",
        "solution": "echo 'hello tb' > /app/hello.txt",
    }
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    env = TerminalBenchEnv(TerminalBenchConfig(rows_path=str(rows), include_samples=False))
    [item] = list(env.items(seed=5))
    assert env.image_for(item) is None  # host userland: the sandbox's own
    image = env.for_sandbox(runs_images=True).image_for(item)
    assert image == SlotImage(name="ubuntu:24.04", workdir="/app")
    assert "./hello.txt" in str(env.prompt(item)[1].content)
    assert env.task(item).environment_files == {"a": b"1"}
    solved = await RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets
    ).run_rollout(item, toolsets)
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0
    assert solved.score.metrics["reward_from_file"] == 0.0
    unsolved = await RolloutRunner(env, pool, idle_agent, toolsets).run_rollout(item, toolsets)
    assert unsolved.score is not None
    assert unsolved.score.reward == 0.0


def test_bad_rows_are_rejected() -> None:
    with pytest.raises(DatasetError, match=r"test\.sh"):
        parse_row({"task_id": "t", "instruction": "x"})
    with pytest.raises(DatasetError, match="unsafe"):
        parse_row(
            {
                "task_id": "t",
                "instruction": "x",
                "test_sh": "true",
                "tests_tar": _tar_b64({"../evil": b"x"}),
            }
        )
