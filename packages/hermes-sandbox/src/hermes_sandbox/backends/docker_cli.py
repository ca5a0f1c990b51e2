"""Short ``docker`` CLI calls with a timeout, and what the daemon here can do."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence

import anyio
from hermes_protocols import SandboxError


async def docker_available(docker: str = "docker") -> str | None:
    """``None`` when a Docker daemon answers, else the reason it does not."""
    try:
        with anyio.fail_after(20):
            done = await anyio.run_process(
                [docker, "info", "--format", "{{.ServerVersion}}"], check=False
            )
    except (OSError, TimeoutError) as exc:
        return f"docker CLI unusable: {exc}"
    if done.returncode != 0:
        return f"no Docker daemon reachable: {done.stderr.decode(errors='replace').strip()[:200]}"
    return None


async def docker_cli(
    docker: str, args: Sequence[str], *, timeout: float
) -> subprocess.CompletedProcess[bytes]:
    """Run ``docker *args`` (output is small: ids, names, states); raise ``SandboxError`` when
    the CLI cannot run or does not finish within ``timeout`` seconds."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.run_process([docker, *args], check=False)
    except TimeoutError as exc:
        raise SandboxError(f"`docker {args[0]}` did not finish within {timeout:.0f}s") from exc
    except OSError as exc:
        raise SandboxError(f"cannot run the docker CLI ({docker!r}): {exc}") from exc


def error_text(done: subprocess.CompletedProcess[bytes]) -> str:
    """The CLI's error message, one line, at most 300 characters."""
    return " ".join(done.stderr.decode(errors="replace").split())[:300]


async def storage_opt_supported(docker: str, image: str, timeout: float) -> bool:
    """Whether ``docker create --storage-opt size=...`` works here (overlay2 needs xfs with
    ``pquota``; btrfs, zfs and devicemapper support it)."""
    name = f"hermes-storage-probe-{uuid.uuid4().hex[:8]}"
    args = ["create", "--name", name, "--storage-opt", "size=64m", image, "true"]
    done = await docker_cli(docker, args, timeout=timeout)
    if done.returncode == 0:
        with anyio.CancelScope(shield=True):
            await docker_cli(docker, ["rm", "-f", name], timeout=timeout)
    return done.returncode == 0
