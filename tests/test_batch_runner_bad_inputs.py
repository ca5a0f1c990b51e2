"""Bad inputs to ``uv run apps/batch_runner``: each fails fast with a clear message, a non-zero
exit code, and no run directory left behind that could pass for a finished run."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), "--no-progress", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_malformed_dataset_lines_are_named_by_line_number(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    data.write_text('{"prompt": "list the files"}\n{"prompt": \n{"cwd": "x"}\n')
    out = tmp_path / "run"
    done = _run("--dataset", str(data), "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2
    assert "line 2: not valid JSON" in done.stderr
    assert "line 3: 'prompt' must be a non-empty string" in done.stderr
    assert "--skip-bad-lines" in done.stderr
    assert not out.exists()


def test_a_token_server_without_a_model_url_is_refused(tmp_path: Path) -> None:
    done = _run("--server-type", "sglang", cwd=tmp_path)
    assert done.returncode == 2
    assert "needs --model-url" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_server_fails_before_any_rollout(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = tmp_path / "run"
    done = _run("--model-url", url, "--model", "m", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 1
    assert f"cannot reach the model server at {url}" in done.stderr
    assert not out.exists()


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _run("--model", str(tmp_path / "nope.gguf"), "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2
    assert "nope.gguf does not exist" in done.stderr
    assert not out.exists()


def test_an_unwritable_output_directory_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = _run("--output", str(blocker / "run"), cwd=tmp_path)
    assert done.returncode == 1
    assert "is not writable" in done.stderr


def test_resume_without_a_run_is_refused(tmp_path: Path) -> None:
    done = _run("--resume", "--output", str(tmp_path / "none"), cwd=tmp_path)
    assert done.returncode == 1
    assert "cannot resume" in done.stderr
