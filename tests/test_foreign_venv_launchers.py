"""The launchers our adapters run under other projects' venvs (TRL, verifiers, tinker-cookbook)
share ``apps/foreign_venv.py``: run from a copy of the checkout's layout, a launcher refuses an
unsynced workspace in one line, and otherwise puts the workspace's site-packages and its
adapter's ``src`` on ``sys.path`` after the interpreter's own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[1] / "apps"
LAUNCHERS = ("trl_env/grpo.py", "verifiers_env/vf_eval.py", "tinker_cookbook_env/group_rollouts.py")
SITE = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _copy(root: Path, launcher: str) -> Path:
    """``launcher`` and the shared part, laid out as in the checkout under ``root``."""
    (root / "apps" / launcher).parent.mkdir(parents=True)
    shutil.copy(APPS / "foreign_venv.py", root / "apps" / "foreign_venv.py")
    return Path(shutil.copy(APPS / launcher, root / "apps" / launcher))


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", str(script)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_launcher_refuses_an_unsynced_workspace_in_one_line(
    tmp_path: Path, launcher: str
) -> None:
    done = _run(_copy(tmp_path, launcher))
    workspace = tmp_path / ".venv" / "lib" / SITE / "site-packages"
    name = Path(launcher).name
    assert done.returncode == 1
    assert done.stderr == f"{name}: no workspace environment at {workspace}: run `uv sync` first\n"


def test_the_workspace_and_the_adapter_come_after_the_interpreters_own(tmp_path: Path) -> None:
    script = _copy(tmp_path, "trl_env/grpo.py")
    workspace = tmp_path / ".venv" / "lib" / SITE / "site-packages"
    workspace.mkdir(parents=True)
    train = script.parent / "src" / "hermes_trl_env" / "train.py"
    train.parent.mkdir(parents=True)
    train.write_text("import sys\n\ndef main():\n    print('\\n'.join(sys.path))\n    return 0\n")
    done = _run(script)
    assert done.returncode == 0, done.stderr
    path = done.stdout.splitlines()
    own = [i for i, p in enumerate(path) if p.startswith(sys.base_prefix)]
    assert own, path
    assert max(own) < path.index(str(workspace)) < path.index(str(script.parent / "src"))
