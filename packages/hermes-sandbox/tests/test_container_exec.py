"""The shared exec wrapper of container-like backends (docker, modal): paths and reset."""

from __future__ import annotations

import posixpath
import subprocess
import uuid
from pathlib import Path

import pytest
from hermes_protocols import WorkspaceEscape
from hermes_sandbox.backends._container_exec import (
    TIMEOUT_EXIT,
    exec_argv,
    reset_script,
    resolve_in_workspace,
)
from hypothesis import given
from hypothesis import strategies as st

WS = "/workspace/slot-0"


def _mark() -> str:
    """A slot marker of this call alone: the wrapper SIGKILLs every process carrying its
    marker, so two tests sharing one (on two xdist workers) kill each other's commands."""
    return f"test-{uuid.uuid4().hex}"


_PART = st.sampled_from(["a", "b c", "..", ".", "", "slot-0", "workspace", "/", "x'y"])


@given(st.lists(_PART, max_size=8), st.booleans())
def test_resolved_paths_stay_in_the_workspace(parts: list[str], allow_root: bool) -> None:
    path = "/".join(parts)
    expected = posixpath.normpath(posixpath.join(WS, path))
    try:
        full = resolve_in_workspace(WS, path, allow_root=allow_root)
    except WorkspaceEscape:
        assert not expected.startswith(WS + "/")
        assert not (allow_root and expected == WS)
        return
    assert full == expected
    assert full.startswith(WS + "/") or (allow_root and full == WS)


def test_sibling_prefixes_are_not_inside() -> None:
    with pytest.raises(WorkspaceEscape):
        resolve_in_workspace(WS, "/workspace/slot-01/x")
    with pytest.raises(WorkspaceEscape):
        resolve_in_workspace(WS, ".")
    assert resolve_in_workspace(WS, ".", allow_root=True) == WS


def test_wrapper_passes_the_command_verbatim_and_reports_timeouts() -> None:
    command = "printf '%s|' \"$1\" 'it''s' $((6*7))"
    done = subprocess.run(
        exec_argv(_mark(), command, 10), capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, "|its|42|")
    slow = subprocess.run(exec_argv(_mark(), "sleep 5", 0.3), capture_output=True, timeout=30)
    assert slow.returncode == TIMEOUT_EXIT


@pytest.mark.parametrize(
    "command",
    ["trap '' TERM; while :; do sleep 0.1; done", "sleep 0.2; kill -9 $$"],
    ids=["ignores-sigterm", "killed-before-its-time"],
)
def test_wrapper_reports_a_sigkilled_timeout_as_a_timeout(command: str) -> None:
    done = subprocess.run(exec_argv(_mark(), command, 0.5), capture_output=True, timeout=30)
    expected = TIMEOUT_EXIT if command.startswith("trap") else 137
    assert done.returncode == expected, done.stderr


def test_reset_empties_a_workspace_with_a_hostile_name(tmp_path: Path) -> None:
    ws = tmp_path / "w s'$(touch PWNED)"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f").write_text("x")
    subprocess.run(["bash", "-c", reset_script(str(ws), _mark())], check=True, timeout=30)
    assert ws.is_dir()
    assert list(ws.iterdir()) == []
    assert not (tmp_path / "PWNED").exists()
    assert not Path("PWNED").exists()
