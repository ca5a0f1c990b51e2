"""Errors a user can cause, through ``uv run apps/batch_runner``: one line naming what to
change, the documented exit code (2: options, 1: the machine), no traceback, and no run
directory left that could pass for a finished run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), "--no-progress", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_an_unknown_environment_exits_2_naming_the_known_ones(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _run("--env", "nope", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2
    line = _one_error_line(done)
    assert "unknown environment 'nope': set --env to one of endless_terminals" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "cannot read config file"), ("max_turns: [1,\n", "is not valid YAML")],
)
def test_a_missing_or_broken_config_file_exits_2(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    config = tmp_path / "run.yaml"
    if content is not None:
        config.write_text(content)
    done = _run("--config", str(config), "--output", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2
    assert expected in _one_error_line(done)
    assert not (tmp_path / "run").exists()


def test_every_option_problem_is_reported_at_once(tmp_path: Path) -> None:
    done = _run(
        "--sandbox", "nomad", "--max-tokens", "9000", "--toolsets", "terminal,web",
        "--output", str(tmp_path / "run"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for expected in ("--nomad-address", "--sandbox-image", "--max-tokens (9000)", "web"):
        assert expected in done.stderr
    assert not (tmp_path / "run").exists()


def test_docker_without_a_daemon_fails_at_start_up_and_marks_nothing_failed(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    done = _run(
        "--sandbox", "docker", "--output", str(out), cwd=tmp_path,
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"},
    )  # fmt: skip
    assert done.returncode == 1
    line = _one_error_line(done)
    assert "the docker sandbox cannot start a host" in line
    assert "choose another --sandbox" in line
    assert not out.exists()  # no failed.jsonl, no run.json: nothing ran


def _docker_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _docker_answers(), reason="no Docker daemon answers")
def test_an_image_docker_cannot_have_is_one_error_naming_the_image_option(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    image = "hermes-test-absent:never"  # neither on the host nor in any registry
    done = _run("--sandbox", "docker", "--sandbox-image", image, "--output", str(out), cwd=tmp_path)
    assert done.returncode == 1
    line = _one_error_line(done)
    assert f"image {image!r} is not on this Docker host" in line
    assert "set --sandbox-image to an image this host has" in line
    assert "starting a host failed" not in done.stderr  # the error, not a warning repeating it
    assert not out.exists()


def test_repeated_dataset_ids_run_as_distinct_rollouts(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    rows = [{"id": i, "prompt": f"Print {n}."} for n, i in enumerate(["a", "a", "a-2"])]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    done = _run(
        "--dataset", str(data), "--sandbox", "local", "--max-turns", "1", "--max-tokens", "8",
        "--output", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["item"]["id"] for r in records) == ["a", "a-2", "a-2-2"]
    assert len({r["id"] for r in records}) == 3
