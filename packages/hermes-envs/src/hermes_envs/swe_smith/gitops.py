"""Host-side git: run git with a timeout, hold a cross-process file lock without blocking."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from filelock import FileLock
from filelock import Timeout as LockTimeout

from hermes_envs.errors import SetupError

FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "hermes-fixtures",
    "GIT_AUTHOR_EMAIL": "fixtures@hermes.invalid",
    "GIT_COMMITTER_NAME": "hermes-fixtures",
    "GIT_COMMITTER_EMAIL": "fixtures@hermes.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}


async def git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> bytes:
    """Run ``git args`` and return stdout; raise :class:`SetupError` on failure or timeout."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    try:
        with anyio.fail_after(timeout):
            result = await anyio.run_process(["git", *args], cwd=cwd, env=full_env, check=False)
    except TimeoutError:
        raise SetupError(f"git {' '.join(args)} did not finish within {timeout:g}s") from None
    if result.returncode != 0:
        raise SetupError(
            f"git {' '.join(args)} failed ({result.returncode}): "
            f"{result.stderr.decode(errors='replace').strip()[-2000:]}"
        )
    return bytes(result.stdout)


@asynccontextmanager
async def file_lock(path: Path, *, timeout: float, poll: float = 0.05) -> AsyncIterator[None]:
    """Hold an exclusive lock on ``path`` (across processes and tasks) without blocking the
    loop or a worker thread: non-blocking attempts with ``poll`` second sleeps in between."""
    lock = FileLock(str(path), thread_local=False)
    deadline = anyio.current_time() + timeout
    while True:
        try:
            lock.acquire(timeout=0)
            break
        except LockTimeout:
            if anyio.current_time() >= deadline:
                raise SetupError(f"could not lock {path} within {timeout:g}s") from None
            await anyio.sleep(poll)
    try:
        yield
    finally:
        lock.release()
