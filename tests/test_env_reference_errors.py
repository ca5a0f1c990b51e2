"""A wrong environment reference, as each app's user types it: exit 2 and one line naming the
app's option and what is wrong, before any model or sandbox starts (issue 23)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each case starts an app (the trainer imports JAX)

NOT_AN_ENV = '''
import socket

import attrs


class Shape:
    """Has a name but nothing else of an environment."""

    name = "shape"


@attrs.frozen
class SocketConfig:
    sock: socket.socket


class SocketEnv:
    name = "socket_env"
    toolsets = ("terminal",)

    def __init__(self, config: SocketConfig) -> None: ...
    def items(self, *, seed, split="train"): return iter(())
    def prompt(self, item): return []
    async def setup_workspace(self, item, slot): return {}
    async def verify(self, item, result, ctx): ...
'''


def _app(name: str) -> list[str]:
    if name == "hermes-envs":
        return [str(Path(sys.executable).parent / "hermes-envs")]
    return [sys.executable, str(ROOT / "apps" / name)]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plugins") / "not_envs.py"
    path.write_text(NOT_AN_ENV)
    return path


@pytest.mark.parametrize(
    ("app", "args", "expected"),
    [
        ("batch_runner", ["--env", "no_such_pkg_q:Env"], "error: --env: no module named"),
        (
            "atropos_env",
            ["process", "--env.environment", "/nonexistent/my_env.py:Env"],
            "atropos_env: --env.environment: no file '/nonexistent/my_env.py'",
        ),
        ("trainer", ["--env", "{plugin}:Shape"], "error: --env: {plugin}:Shape (file "),
        ("hermes-envs", ["check", "{plugin}:SocketEnv"], "hermes-envs: ENV: cattrs cannot"),
    ],
    ids=["batch_runner", "atropos_env", "trainer", "hermes-envs"],
)
def test_one_line_naming_the_option(
    app: str, args: list[str], expected: str, plugin: Path, tmp_path: Path
) -> None:
    argv = [a.format(plugin=plugin) for a in args]
    if app in ("batch_runner", "trainer"):
        argv += ["--output", str(tmp_path / "run")]
    done = subprocess.run(
        [*_app(app), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith(("error:", app))]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(expected.format(plugin=plugin)), lines[0]
    if app == "trainer":
        assert "lacks items, prompt, setup_workspace, verify" in lines[0]
