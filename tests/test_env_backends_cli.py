"""The three runs issue 23 reproduced, through the real batch runner (embedded SmolLM2).

``--env swe_smith_oracle`` on bwrap died in the record writer (bytes in setup metadata) and on
docker in setup (no ``git`` in the image); ``--env terminal_bench --sandbox docker`` ran every
task in one image in the host-userland mode. Each run here is one small item: it must write
its record, summary and report, fail nothing for infrastructure, and (terminal_bench) run the
task in its own image. Docker runs use the tasks image of ``.ci/docker-tasks.sh``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_env_backends import NO_DOCKER, TASKS_IMAGE

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"
SMALL = ["--num-items", "1", "--max-turns", "1", "--max-tokens", "16", "--no-progress"]
DOCKER = ["--sandbox", "docker", "--sandbox-image", TASKS_IMAGE]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
needs_docker = pytest.mark.skipif(NO_DOCKER is not None, reason=f"docker: {NO_DOCKER}")


def _run(out: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    done = subprocess.run(
        [sys.executable, str(APP), "--output", str(out), *SMALL, *args],
        cwd=out.parent,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "failed.jsonl").read_text() == "", "an infrastructure failure"
    [line] = (out / "trajectories.jsonl").read_text().splitlines()
    record = json.loads(line)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["counts"]["kept"] == 1
    assert record["id"] in (out / "report.html").read_text()
    assert isinstance(record["reward"], float)
    return done, record


@pytest.mark.parametrize(
    "sandbox", ["bwrap", pytest.param("docker", marks=needs_docker)], ids=["bwrap", "docker"]
)
def test_swe_smith_oracle_runs_and_records_json_only(sandbox: str, tmp_path: Path) -> None:
    options = json.dumps({"cache_dir": str(tmp_path / "swe-cache")})
    box = DOCKER if sandbox == "docker" else []
    _, record = _run(tmp_path / "run", "--env", "swe_smith_oracle", "--env-options", options, *box)
    assert record["env"] == "swe_smith_oracle"
    workspace = record["metadata"]["workspace"]  # type: ignore[index]
    assert set(workspace) == {"repo", "ref", "prefill_messages"}


@needs_docker
def test_terminal_bench_on_docker_runs_each_task_in_its_own_image(tmp_path: Path) -> None:
    alias = f"--sandbox-image-alias=ubuntu:24.04={TASKS_IMAGE}"  # collect-errors' FROM
    done, record = _run(tmp_path / "run", "--env", "terminal_bench", *DOCKER, alias)
    assert "userland" not in done.stderr  # no host-userland warning on docker
    assert record["metadata"]["workspace"] == {  # type: ignore[index]
        "task": "collect-errors",
        "image": "environment/Dockerfile",
        "host_userland": False,
        "prefill_messages": record["prefill_messages"],
    }
