"""The sandbox server's wire format, shared by the server and the ``remote`` backend client.

Exec requests and results are JSON; file bodies are raw bytes (streamed both ways). Errors are
JSON ``{"error": kind, "message": text}`` with an HTTP status; each kind maps to one exception
type on both sides, so a remote slot raises what a local slot would.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from hermes_protocols import ExecResult, SandboxError, SandboxTimeout, WorkspaceEscape

API_PREFIX = "/v1"
PROTOCOL_VERSION = 1

# kind -> (HTTP status, exception type raised by the client)
_KINDS: dict[str, tuple[int, type[Exception]]] = {
    "workspace_escape": (403, WorkspaceEscape),
    "permission_denied": (403, PermissionError),
    "not_found": (404, FileNotFoundError),
    "is_a_directory": (409, IsADirectoryError),
    "not_a_directory": (409, NotADirectoryError),
    "bad_request": (400, ValueError),
    "timeout": (504, SandboxTimeout),
    "no_such_slot": (404, SandboxError),
    "unauthorized": (401, SandboxError),
    "sandbox_error": (500, SandboxError),
}


class NoSuchSlot(SandboxError, LookupError):
    """The server has no slot with that index."""


def error_kind(exc: BaseException) -> tuple[int, str]:
    """The (status, kind) a server answers for ``exc``."""
    if isinstance(exc, NoSuchSlot):
        kind = "no_such_slot"
    elif isinstance(exc, WorkspaceEscape):
        kind = "workspace_escape"
    elif isinstance(exc, PermissionError):
        kind = "permission_denied"
    elif isinstance(exc, FileNotFoundError):
        kind = "not_found"
    elif isinstance(exc, IsADirectoryError):
        kind = "is_a_directory"
    elif isinstance(exc, NotADirectoryError):
        kind = "not_a_directory"
    elif isinstance(exc, SandboxTimeout):
        kind = "timeout"
    elif isinstance(exc, (ValueError, KeyError, TypeError)):
        kind = "bad_request"
    else:
        kind = "sandbox_error"
    return _KINDS[kind][0], kind


def error_from_wire(status: int, payload: Mapping[str, Any], context: str) -> Exception:
    """The exception a client raises for an error answer."""
    kind = str(payload.get("error", "sandbox_error"))
    message = f"{context}: {payload.get('message', f'HTTP {status}')}"
    _, exc_type = _KINDS.get(kind, (status, SandboxError))
    if kind == "unauthorized":
        message += " (check the server token)"
    return exc_type(message)


def exec_request(
    command: str,
    *,
    timeout: float,
    cwd: str | None,
    env: Mapping[str, str] | None,
    stdin: bytes | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"command": command, "timeout": timeout}
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = dict(env)
    if stdin is not None:
        body["stdin_b64"] = base64.b64encode(stdin).decode("ascii")
    return body


def parse_exec_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Validated keyword arguments for ``Slot.exec`` (raises ValueError on bad input)."""
    command = body.get("command")
    timeout = body.get("timeout")
    if not isinstance(command, str):
        raise ValueError("'command' must be a string")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError("'timeout' must be a positive number")
    cwd = body.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError("'cwd' must be a string")
    env = body.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("'env' must map strings to strings")
    stdin_b64 = body.get("stdin_b64")
    stdin = None if stdin_b64 is None else base64.b64decode(str(stdin_b64), validate=True)
    return {"command": command, "timeout": float(timeout), "cwd": cwd, "env": env, "stdin": stdin}


def result_to_wire(result: ExecResult) -> dict[str, Any]:
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "duration_s": result.duration_s,
    }


def result_from_wire(data: Mapping[str, Any]) -> ExecResult:
    return ExecResult(
        exit_code=int(data["exit_code"]),
        stdout=str(data["stdout"]),
        stderr=str(data.get("stderr", "")),
        timed_out=bool(data.get("timed_out", False)),
        truncated=bool(data.get("truncated", False)),
        duration_s=float(data.get("duration_s", 0.0)),
    )
