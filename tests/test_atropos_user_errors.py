"""Errors a user can cause, through ``uv run apps/atropos_env``: one line naming what to
change, the documented exit code (2: options, 1: the machine), no traceback or exception
group, and no empty output file left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "atropos_env"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "HOME": str(cwd), **(env or {})},
    )


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert "ExceptionGroup" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("atropos_env: ")]
    errors = [line for line in errors if not line.startswith("atropos_env: stopped")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "cannot read --config"), ("env: {max_agent_turns: [1,\n", "is not valid YAML")],
)
def test_a_missing_or_broken_config_file_exits_2(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    config = tmp_path / "env.yaml"
    if content is not None:
        config.write_text(content)
    done = _run("process", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert expected in _error_line(done)


def test_env_without_a_field_name_exits_2(tmp_path: Path) -> None:
    done = _run("process", "--env", "nope", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown option --env" in _error_line(done)


def test_an_unknown_environment_exits_2(tmp_path: Path) -> None:
    done = _run("process", "--env.environment", "nope", cwd=tmp_path)
    assert done.returncode == 2
    assert "set --env.environment to one of endless_terminals" in _error_line(done)


def test_docker_without_a_daemon_fails_in_one_line_and_leaves_no_empty_jsonl(
    tmp_path: Path,
) -> None:
    out = tmp_path / "groups.jsonl"
    done = _run(
        "process", "--env.tool_pool_mode", "docker", "--env.total_steps", "1",
        "--env.data_path_to_save_groups", str(out), cwd=tmp_path,
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"},
    )  # fmt: skip
    assert done.returncode == 1
    assert "the docker sandbox cannot start a host" in _error_line(done)
    assert not out.exists()


def test_an_unreachable_run_api_fails_in_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    done = _run(
        "serve", "--env.rollout_server_url", url, "--env.tool_pool_mode", "local", cwd=tmp_path
    )
    assert done.returncode == 1
    line = _error_line(done)
    assert f"cannot reach the Atropos run-api at {url}" in line
    assert "--env.rollout_server_url" in line
