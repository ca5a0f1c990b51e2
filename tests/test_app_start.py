"""The apps as a user starts them: nothing on stderr that the user did not ask for (a
third-party notice, runpy's warning), and the trainer run from the default environment says in
one line what to type instead of ending in a traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMMANDS = {
    "batch_runner": [str(APPS / "batch_runner"), "--help"],
    "atropos_env": [str(APPS / "atropos_env"), "--help"],
    "atropos trainer client": ["-m", "hermes_atropos_env.trainer", "--help"],
    "trainer": [str(APPS / "trainer"), "--help"],
}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, check=False, env=env
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_start_up_prints_nothing_but_what_was_asked(name: str) -> None:
    if name == "trainer" and importlib.util.find_spec("hermes_trainer") is None:
        pytest.skip("the trainer's dependencies are not installed (uv sync --inexact ...)")
    done = _run(*COMMANDS[name])
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower()
    assert done.stderr == ""


def test_the_trainer_without_its_dependencies_says_what_to_type() -> None:
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = _run("-S", str(APPS / "trainer"), "--help", env=bare)  # -S: no site-packages
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "`uv run --package hermes-trainer apps/trainer" in line
