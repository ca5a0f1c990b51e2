"""The wire format between a client and ``hermes-exec`` (the agent in ``agent.c``).

Every backend that runs the agent (bwrap, local, and any container backend) speaks this.

**Control socket** (a ``SOCK_STREAM`` unix socket; the agent's end is ``--control-fd N``): the
agent first sends a ``H`` frame (u32 protocol version, u32 its pid). For each command the client
then sends the single byte ``x`` with ``SCM_RIGHTS`` carrying the agent's end of a fresh
socketpair, and never anything else. The agent exits, killing every command, when the control
socket closes.

**Exec socket** (one per command): frames ``u32 length | u8 type | payload`` (big-endian;
``length`` counts the payload). Client to agent: one ``R`` request, then, when the request asked
for stdin, ``I`` chunks and one ``C`` (end of stdin). Agent to client: ``o``/``e`` (the first
half of the output cap of stdout/stderr, streamed in batches of 64 KiB, the rest of it when the
command ends), at the end ``O``/``E`` (the last half, kept in a ring) and the final
frame: ``X`` (i32 exit code: the command's, ``128 + signal``, or 124 on timeout; u8 timed out;
u64 stdout total; u64 stderr total) or ``F`` (UTF-8 message: the command could not start). The
agent then closes the socket. Closing it earlier cancels the command: its whole tree is killed.

A request payload is fields ``u8 tag | u32 length | bytes``: ``a`` an argv element (in order,
at least one; without a ``/`` it is looked up on the agent's own ``PATH``), ``e`` one
``NAME=value`` of the environment (the command gets exactly these), ``d`` the working
directory, ``l`` an rlimit (u32 resource, u64 value for soft and hard, ``2**64 - 1`` =
unlimited; at most 16), ``t`` the timeout in ms (u64), ``m`` the output cap per stream in bytes
(u64), ``s`` (empty) stdin follows, ``u`` (u32 uid, u32 gid) run as that user (the agent needs
the privilege to switch).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import attrs

PROTOCOL_VERSION = 1
HEADER = struct.Struct(">IB")
EXIT = struct.Struct(">iBQQ")
HELLO = struct.Struct(">II")
RLIMIT = struct.Struct(">IQ")
U64 = struct.Struct(">Q")
IDS = struct.Struct(">II")
UNLIMITED = (1 << 64) - 1
MAX_FRAME = 64 << 20
STDIN_CHUNK = 64 << 10
NEW_EXEC = b"x"


@attrs.frozen(slots=True, kw_only=True)
class ExecRequest:
    """One command for the agent: what to run, where, with which limits and input."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None
    timeout_s: float
    max_output_bytes: int
    rlimits: tuple[tuple[int, int | None], ...] = ()
    stdin: bytes | None = None
    user: tuple[int, int] | None = None


@attrs.frozen(slots=True)
class ExitFrame:
    """The agent's final report of a command."""

    code: int
    timed_out: bool
    stdout_total: int
    stderr_total: int


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame: ``u32 length | u8 type | payload``."""
    return HEADER.pack(len(payload), kind[0]) + payload


def _field(tag: bytes, value: bytes) -> bytes:
    return tag + struct.pack(">I", len(value)) + value


def encode_request(request: ExecRequest) -> bytes:
    """The ``R`` frame of ``request`` (raises ``ValueError`` on what the agent cannot take)."""
    if not request.argv:
        raise ValueError("an exec request needs at least one argv element")
    if len(request.rlimits) > 16:
        raise ValueError("at most 16 rlimits per request")
    fields = [_field(b"a", arg.encode()) for arg in request.argv]
    fields += [_field(b"e", f"{name}={value}".encode()) for name, value in request.env.items()]
    if request.cwd is not None:
        fields.append(_field(b"d", request.cwd.encode()))
    for resource, value in request.rlimits:
        fields.append(_field(b"l", RLIMIT.pack(resource, UNLIMITED if value is None else value)))
    fields.append(_field(b"t", U64.pack(max(1, round(request.timeout_s * 1000)))))
    fields.append(_field(b"m", U64.pack(request.max_output_bytes)))
    if request.stdin is not None:
        fields.append(_field(b"s", b""))
    if request.user is not None:
        fields.append(_field(b"u", IDS.pack(*request.user)))
    texts = [*request.argv, *request.env, *request.env.values(), request.cwd or ""]
    if any("\0" in text for text in texts):
        raise ValueError("argv, env and cwd cannot contain NUL characters")
    body = b"".join(fields)
    if len(body) > MAX_FRAME:
        raise ValueError(f"the command and its environment exceed {MAX_FRAME >> 20} MiB")
    return frame(b"R", body)
