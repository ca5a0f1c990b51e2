"""The three runs issue 23 reproduced, through the real batch runner (embedded SmolLM2).

``--env swe_smith_oracle`` on bwrap died in the record writer (bytes in setup metadata) and on
docker in setup (no ``git`` in the image); ``--env terminal_bench --sandbox docker`` ran every
task in one image in the host-userland mode. The commands are the ones docs/environments.md
shows ("Shipped environments"), run on one small item each: each must write its record,
summary and report, fail nothing for infrastructure, and (terminal_bench) run the task in its
own image. Docker runs use the tasks image of ``.ci/docker-tasks.sh``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_env_backends import NO_DOCKER, TASKS_IMAGE

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"
DOC = ROOT / "docs" / "environments.md"
SMALL = ["--num-items", "1", "--max-turns", "1", "--max-tokens", "16", "--no-progress"]


def _documented() -> dict[tuple[str, str], list[str]]:
    """The batch runner commands of the doc's shipped-environments block, by (env, sandbox)."""
    section = DOC.read_text().split("## Shipped environments", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    commands: dict[tuple[str, str], list[str]] = {}
    for line in block.group(1).replace("\\\n", " ").splitlines():
        argv = shlex.split(line)
        assert argv[:3] == ["uv", "run", "apps/batch_runner"], line
        flags = dict(zip(argv[3::2], argv[4::2], strict=False))
        commands[(flags["--env"], flags.get("--sandbox", "bwrap"))] = argv[3:]
    return commands


COMMANDS = _documented()

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
needs_docker = pytest.mark.skipif(NO_DOCKER is not None, reason=f"docker: {NO_DOCKER}")


def _run(out: Path, args: list[str]) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(APP), *args, "--output", str(out), *SMALL],
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
    _, record = _run(tmp_path / "run", COMMANDS[("swe_smith_oracle", sandbox)])
    assert record["env"] == "swe_smith_oracle"
    assert set(record["metadata"]["workspace"]) == {"repo", "ref", "prefill_messages"}


@needs_docker
def test_terminal_bench_on_docker_runs_each_task_in_its_own_image(tmp_path: Path) -> None:
    command = COMMANDS[("terminal_bench", "docker")]
    assert f"ubuntu:24.04={TASKS_IMAGE}" in command  # the samples' FROM, aliased
    done, record = _run(tmp_path / "run", command)
    assert "userland" not in done.stderr  # no host-userland warning on docker
    assert record["metadata"]["workspace"] == {
        "task": "collect-errors",
        "image": "environment/Dockerfile",
        "host_userland": False,
        "prefill_messages": record["prefill_messages"],
    }
