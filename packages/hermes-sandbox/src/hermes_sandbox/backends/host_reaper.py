"""Remove a directory host the moment the process owning it dies without closing it.

A process killed with ``SIGKILL`` cannot clean up: its host's size-limited tmpfs mounts, host
directory and cgroups would stay until the next orphan sweep. :class:`HostReaper` starts a
small watcher process whose stdin is a pipe from the owner. It is not the owner's child (the
process started forks it and exits, so a supervisor that kills a dead worker's children, as
Ray does, misses it) and runs in a session of its own (a signal to the owner's process group
does not reach it). A normal close writes :data:`CLOSED` and the watcher exits; end of file
without it means the owner died, and the watcher removes the host
(:func:`~hermes_sandbox.cleanup.remove_orphaned_host`) and exits.

Run as ``python -m hermes_sandbox.backends.host_reaper HOST_DIR``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import anyio
from anyio.abc import ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

CLOSED = b"closed\n"
START_WAIT_S = 30.0
"""How long starting the watcher may take."""
STOP_WAIT_S = 10.0
"""How long a normal close waits for the watcher to exit before killing it."""


class HostReaper:
    """The watcher of one host directory, started by the process that owns the host."""

    def __init__(self, stdin: ByteSendStream, pidfd: int) -> None:
        self._stdin = stdin
        self._pidfd = pidfd

    @classmethod
    async def start(cls, host_dir: str) -> HostReaper:
        with anyio.fail_after(START_WAIT_S):
            launcher = await anyio.open_process(
                [sys.executable, "-m", __name__, host_dir],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,
            )
            assert launcher.stdin is not None
            assert launcher.stdout is not None
            try:
                line = await BufferedByteReceiveStream(launcher.stdout).receive_until(b"\n", 32)
                await launcher.wait()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await launcher.stdin.aclose()  # the watcher, if forked, sees its owner gone
                    launcher.kill()
                    await launcher.wait()
                raise
        return cls(launcher.stdin, os.pidfd_open(int(line)))

    async def stop(self) -> None:
        """The host was closed normally: tell the watcher, and wait for it to exit."""
        with anyio.CancelScope(shield=True):
            try:
                await self._stdin.send(CLOSED)
                await self._stdin.aclose()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the watcher is gone already
            try:
                with anyio.move_on_after(STOP_WAIT_S):
                    await anyio.wait_readable(self._pidfd)
                    return
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            finally:
                os.close(self._pidfd)


def main(argv: list[str]) -> int:
    """Wait for the owner's end; remove ``argv[1]`` unless it was closed normally."""
    (host_dir,) = argv[1:]
    if os.fork():
        return 0
    print(os.getpid(), flush=True)
    sys.stdout.close()
    if sys.stdin.buffer.read() == CLOSED:
        return 0
    from hermes_sandbox.cleanup import remove_orphaned_host

    for removed in remove_orphaned_host(host_dir):
        print(f"hermes-sandbox reaper: removed {removed.kind} {removed.what}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
