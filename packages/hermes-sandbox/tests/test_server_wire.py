"""Invariants of the server wire format and of the lexical workspace checks (hypothesis)."""

from __future__ import annotations

import posixpath

import pytest
from hermes_protocols import ExecResult, SandboxError, SandboxTimeout, WorkspaceEscape
from hermes_sandbox import HostSpec
from hermes_sandbox.backends.modal import ModalConfig, ModalHost
from hermes_sandbox.server import wire
from hypothesis import given
from hypothesis import strategies as st

results = st.builds(
    ExecResult,
    exit_code=st.integers(-255, 255),
    stdout=st.text(),
    stderr=st.text(),
    timed_out=st.booleans(),
    truncated=st.booleans(),
    duration_s=st.floats(0, 1e6, allow_nan=False),
)


@given(results)
def test_exec_results_round_trip(result: ExecResult) -> None:
    assert wire.result_from_wire(wire.result_to_wire(result)) == result


@given(
    st.text(),
    st.floats(0.001, 1e5),
    st.none() | st.text(),
    st.none() | st.dictionaries(st.text(), st.text()),
    st.none() | st.binary(),
)
def test_exec_requests_round_trip(
    command: str, timeout: float, cwd: str | None, env: dict[str, str] | None, stdin: bytes | None
) -> None:
    body = wire.exec_request(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
    assert wire.parse_exec_request(body) == {
        "command": command,
        "timeout": timeout,
        "cwd": cwd,
        "env": env,
        "stdin": stdin,
    }


@pytest.mark.parametrize(
    "exc",
    [
        WorkspaceEscape("x"),
        PermissionError("x"),
        FileNotFoundError("x"),
        IsADirectoryError("x"),
        NotADirectoryError("x"),
        SandboxTimeout("x"),
        ValueError("x"),
        wire.NoSuchSlot("x"),
        SandboxError("x"),
    ],
)
def test_client_raises_the_type_the_server_saw(exc: Exception) -> None:
    status, kind = wire.error_kind(exc)
    rebuilt = wire.error_from_wire(status, {"error": kind, "message": str(exc)}, "ctx")
    assert isinstance(rebuilt, type(exc)) or (
        isinstance(exc, wire.NoSuchSlot) and isinstance(rebuilt, SandboxError)
    )


@pytest.mark.parametrize("body", [{}, {"command": 1, "timeout": 1}, {"command": "x", "timeout": 0}])
def test_bad_exec_requests_are_rejected(body: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must be"):
        wire.parse_exec_request(body)


_HOST = ModalHost(HostSpec("p", "p--h", 2), sandbox=None, config=ModalConfig(), errors=None)


@given(st.text(alphabet="ab./", max_size=30))
def test_lexical_resolution_stays_inside_the_workspace(path: str) -> None:
    slot = _HOST.slot(0)
    ws = slot.workspace
    try:
        full = slot.resolve(path)  # type: ignore[attr-defined]
    except WorkspaceEscape:
        normalized = posixpath.normpath(posixpath.join(ws, path))
        assert not normalized.startswith(ws + "/")
    else:
        assert full.startswith(ws + "/")
