"""The client side of ``hermes-exec``: run commands through an agent's control socket.

Every command gets its own socketpair, handed to the agent over the control socket, so
concurrent commands share nothing and no background reader is needed: the caller of
:meth:`Executor.run` reads its own command's frames. Cancelling ``run`` closes that socket, and
the agent kills the command's whole tree. An agent that goes away mid-command raises
:class:`ExecutorDied`; the owner then replaces the agent.
"""

from __future__ import annotations

import socket
import time

import anyio
from anyio.abc import UNIXSocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from hermes_protocols import ExecResult, SandboxError

from hermes_sandbox._output import CappedOutput
from hermes_sandbox.executor import wire

GUARD_S = 30.0
"""How long past a command's timeout the client waits for the agent's answer."""


class ExecutorDied(SandboxError):
    """The agent of a sandbox went away; the sandbox's executor must be replaced."""


async def read_frame(stream: BufferedByteReceiveStream) -> tuple[bytes, bytes]:
    """The next ``(type, payload)``; ``anyio.IncompleteRead``/``EndOfStream`` when it ends."""
    length, kind = wire.HEADER.unpack(await stream.receive_exactly(wire.HEADER.size))
    if length > wire.MAX_FRAME:
        raise SandboxError(f"hermes-exec sent a {length}-byte frame; the protocol is broken")
    return bytes([kind]), await stream.receive_exactly(length) if length else b""


async def handshake(control: UNIXSocketStream, timeout: float) -> int:
    """Wait for the agent's hello; its pid. Raises ``ExecutorDied`` when it never comes."""
    reader = BufferedByteReceiveStream(control)
    try:
        with anyio.fail_after(timeout):
            kind, payload = await read_frame(reader)
    except TimeoutError as exc:
        raise ExecutorDied(f"hermes-exec did not start within {timeout:.0f}s") from exc
    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError) as exc:
        raise ExecutorDied("hermes-exec exited before it was ready") from exc
    if kind != b"H" or len(payload) != wire.HELLO.size:
        raise ExecutorDied(f"hermes-exec sent {kind!r} instead of its hello")
    version, pid = wire.HELLO.unpack(payload)
    if version != wire.PROTOCOL_VERSION:
        raise ExecutorDied(f"hermes-exec speaks protocol {version}, not {wire.PROTOCOL_VERSION}")
    return int(pid)


class Executor:
    """A running agent, reached through its connected control socket (after :func:`handshake`)."""

    def __init__(self, control: UNIXSocketStream, name: str) -> None:
        self._control = control
        self._name = name
        self._send_lock = anyio.Lock()
        self.dead = False

    async def aclose(self) -> None:
        self.dead = True
        await self._control.aclose()

    async def _open(self) -> UNIXSocketStream:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            async with self._send_lock:
                await self._control.send_fds(wire.NEW_EXEC, [theirs.fileno()])
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            ours.close()
            self.dead = True
            raise ExecutorDied(f"the command executor of {self._name} is gone ({exc})") from exc
        finally:
            theirs.close()
        return await UNIXSocketStream.from_socket(ours)

    async def run(self, request: wire.ExecRequest) -> ExecResult:
        """Run one command; the result carries head + tail of each stream within the cap."""
        if self.dead:
            raise ExecutorDied(f"the command executor of {self._name} is gone")
        started = time.monotonic()
        body = wire.encode_request(request)
        stream = await self._open()
        async with stream:
            try:
                with anyio.fail_after(request.timeout_s + GUARD_S):
                    return await self._exchange(stream, body, request, started)
            except TimeoutError as exc:
                self.dead = True
                raise ExecutorDied(
                    f"the command executor of {self._name} did not answer within "
                    f"{request.timeout_s + GUARD_S:.0f}s"
                ) from exc

    async def _exchange(
        self, stream: UNIXSocketStream, body: bytes, request: wire.ExecRequest, started: float
    ) -> ExecResult:
        out = CappedOutput(request.max_output_bytes)
        err = CappedOutput(request.max_output_bytes)
        sinks = {b"o": out, b"O": out, b"e": err, b"E": err}
        reader = BufferedByteReceiveStream(stream)
        try:
            await stream.send(body)
        except (anyio.BrokenResourceError, OSError) as exc:
            raise self._died(exc) from exc
        if request.stdin is None:
            final = await self._frames(reader, sinks)
        else:
            failure: BaseException | None = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(_feed, stream, request.stdin)
                try:
                    final = await self._frames(reader, sinks)
                except SandboxError as exc:  # raised below, not as an exception group
                    failure = exc
                tg.cancel_scope.cancel()
            if failure is not None:
                raise failure
        out.total, err.total = final.stdout_total, final.stderr_total
        return ExecResult(
            exit_code=final.code,
            stdout=out.render(),
            stderr=err.render(),
            timed_out=final.timed_out,
            truncated=out.truncated or err.truncated,
            duration_s=time.monotonic() - started,
        )

    async def _frames(
        self, reader: BufferedByteReceiveStream, sinks: dict[bytes, CappedOutput]
    ) -> wire.ExitFrame:
        while True:
            try:
                kind, payload = await read_frame(reader)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError) as exc:
                raise self._died(exc) from exc
            sink = sinks.get(kind)
            if sink is not None:
                sink.feed(payload)
            elif kind == b"F":
                raise SandboxError(f"{self._name}: {payload.decode('utf-8', 'replace')}")
            elif kind == b"X":
                code, timed_out, stdout_total, stderr_total = wire.EXIT.unpack(payload)
                return wire.ExitFrame(code, bool(timed_out), stdout_total, stderr_total)

    def _died(self, exc: BaseException) -> ExecutorDied:
        self.dead = True
        return ExecutorDied(
            f"the command executor of {self._name} died during a command ({exc!r}); "
            "its result is lost and the executor will be replaced"
        )


async def _feed(stream: UNIXSocketStream, data: bytes) -> None:
    try:
        for start in range(0, len(data), wire.STDIN_CHUNK):
            await stream.send(wire.frame(b"I", data[start : start + wire.STDIN_CHUNK]))
        await stream.send(wire.frame(b"C"))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the command ended without reading all of it
