"""Issue 15 finding 4: ``setsid env -i`` children never outlive their command (local, bwrap):
bwrap through the command's pid namespace, local through its executor (a child subreaper),
with or without cgroups."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    SandboxPool,
)

pytestmark = pytest.mark.anyio

# Leaves the process group (setsid) and drops the environment marker (env -i).
_ESCAPE = "setsid env -i sleep {token} </dev/null >/dev/null 2>&1 & echo started"


async def _gone(find: Callable[[str], list[int]], token: str) -> bool:
    await anyio.sleep(0.5)  # SIGKILL was sent before exec returned; let the kernel reap
    return not find(token)


@pytest.mark.parametrize("kind", ["local", "bwrap"])
async def test_setsid_env_i_children_die_with_the_command(
    sandbox_root: Path, kind: str, leftover_processes: Callable[[str], list[int]]
) -> None:
    root = str(sandbox_root / kind)
    backend = (
        LocalBackend(LocalConfig(root_dir=root))
        if kind == "local"
        else BwrapBackend(BwrapConfig(root_dir=root))
    )
    # unique sleep lengths: other tests and pytest-xdist workers run at the same time
    first, second = (f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}" for _ in "12")
    async with SandboxPool(backend, PoolConfig(name="escape", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        finished = await slot.exec(_ESCAPE.format(token=first), timeout=30)
        assert finished.stdout == "started\n"
        assert await _gone(leftover_processes, first)
        timed = await slot.exec(_ESCAPE.format(token=second) + "; sleep 60", timeout=1)
        assert timed.timed_out
        assert await _gone(leftover_processes, second)
        await pool.release(slot)
    shutil.rmtree(root)
