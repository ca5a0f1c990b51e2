"""The control socket a sandbox's agent connects back to (see
:mod:`~hermes_sandbox.backends.agent_host`): listened on in the slot's control directory,
accepted once while the sandbox starts."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import UNIXSocketStream
from hermes_protocols import SandboxError

from hermes_sandbox.executor import ExecutorDied

SOCKET_NAME = "s"


def listen(control_dir: str) -> tuple[socket.socket, str]:
    """A listening unix socket ``<control_dir>/s`` (bound through a directory descriptor, so
    the path length of a deep root does not matter). Blocking."""
    path = os.path.join(control_dir, SOCKET_NAME)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    fd = os.open(control_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock.bind(f"/proc/self/fd/{fd}/{SOCKET_NAME}")
        os.chmod(path, 0o777)  # the slot's uid connects; the directory is what guards it
        sock.listen(1)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)
    return sock, path


async def accept_agent(
    listener: socket.socket, running: Callable[[], Awaitable[bool]], name: str, timeout: float
) -> UNIXSocketStream:
    """The agent's connection; fails early when ``running()`` says its sandbox has ended."""
    with anyio.move_on_after(timeout):
        while True:
            with anyio.move_on_after(0.5):
                await anyio.wait_readable(listener)
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                if not await running():
                    raise SandboxError(
                        f"sandbox {name} ended before its command executor connected"
                    ) from None
                continue
            return await UNIXSocketStream.from_socket(conn)
    raise ExecutorDied(f"the command executor of sandbox {name} did not connect in {timeout}s")
