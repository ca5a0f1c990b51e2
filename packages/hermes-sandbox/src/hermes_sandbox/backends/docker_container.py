"""A slot container whose main process is attached to this process's pipe (its lease).

``docker run -i --rm`` keeps the main process's stdin open while the pool lives: when the pool
closes it, or dies (even by SIGKILL: the pipe's writer is gone), the main process reads EOF
and exits, the container ends and Docker removes it. While attached, the pool renews a lease
by writing a newline; a main process that hears nothing for ``lease_s`` exits too (a pool that
hangs without dying). The main process is PID 1 of the container, so nothing inside can kill
it (the kernel ignores signals a namespace's init has no handler for).
"""

from __future__ import annotations

import contextlib
import subprocess

import anyio
from anyio.abc import Process
from hermes_protocols import SandboxError

from hermes_sandbox.backends.docker_cli import docker_cli

READY = b"hermes-ready"
# PID 1 of a slot container: says it runs, then waits for lease renewals until EOF or silence.
LEASE_KEEPER = f'echo {READY.decode()}; while read -r -t "$1" _; do :; done'
_STOP_TIMEOUT_S = 30.0


def keeper_main(lease_s: float) -> list[str]:
    """The container's main command: :data:`LEASE_KEEPER` with a lease of ``lease_s``."""
    return ["bash", "-c", LEASE_KEEPER, "hermes-lease", f"{lease_s:.0f}"]


async def _first_line(process: Process) -> bytes:
    assert process.stdout is not None
    seen = b""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
        while b"\n" not in seen:
            seen += await process.stdout.receive()
    return seen.split(b"\n", 1)[0]


class AttachedContainer:
    """A running slot container; :meth:`stop` removes it and waits for its CLI to exit."""

    def __init__(self, docker: str, name: str, process: Process) -> None:
        self.docker = docker
        self.name = name
        self._process = process

    @classmethod
    async def start(cls, argv: list[str], name: str, timeout: float) -> AttachedContainer:
        """Run ``argv`` (a ``docker run -i`` of :func:`keeper_main`) until the keeper is up."""
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a terminal's Ctrl-C reaches the pool, not the CLI
            )
        except OSError as exc:
            raise SandboxError(f"cannot run the docker CLI ({argv[0]!r}): {exc}") from exc
        container = cls(argv[0], name, process)
        try:
            with anyio.fail_after(timeout):
                line = await _first_line(process)
            if line != READY:
                raise SandboxError(f"docker run of {name} failed: {await container._stderr()}")
        except TimeoutError as exc:
            with anyio.CancelScope(shield=True):
                await container.stop()
            raise SandboxError(f"container {name} did not start within {timeout:.0f}s") from exc
        except BaseException:
            with anyio.CancelScope(shield=True):
                await container.stop()
            raise
        return container

    async def _stderr(self) -> str:
        assert self._process.stderr is not None
        seen = b""
        with anyio.move_on_after(10), contextlib.suppress(anyio.EndOfStream, OSError):
            while len(seen) < 4096:
                seen += await self._process.stderr.receive()
        text = " ".join(seen.decode(errors="replace").split())
        return text[:500] or f"exit status {self._process.returncode}"

    @property
    def alive(self) -> bool:
        """Whether the container's main process (and so its CLI) still runs."""
        return self._process.returncode is None

    async def renew(self) -> bool:
        """Renew the lease; ``False`` when the container is gone."""
        if not self.alive or self._process.stdin is None:
            return False
        try:
            with anyio.fail_after(5):
                await self._process.stdin.send(b"\n")
        except (OSError, TimeoutError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return self.alive

    async def stop(self) -> None:
        """Remove the container (SIGKILL of everything in it) and reap its CLI. Idempotent."""
        with anyio.CancelScope(shield=True):
            if self.alive:
                await docker_cli(self.docker, ["rm", "-f", self.name], timeout=_STOP_TIMEOUT_S)
            if self._process.stdin is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await self._process.stdin.aclose()
            with anyio.move_on_after(_STOP_TIMEOUT_S):
                await self._process.wait()
            if self._process.returncode is None:
                self._process.kill()
                await self._process.wait()
            await self._process.aclose()
