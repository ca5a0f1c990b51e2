"""Issue 24 finding 10: on a full disk the terminal tool lost ``cd``/``export`` silently."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    HostBackend,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    ResourceLimits,
    SandboxPool,
    TerminalTool,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="size-limited workspaces are mounted as root"),
]


def _backend(kind: str, root: Path) -> HostBackend:
    limits = ResourceLimits(disk_bytes=16 << 20)
    if kind == "local":
        return LocalBackend(LocalConfig(root_dir=str(root), limits=limits))
    return BwrapBackend(BwrapConfig(root_dir=str(root), limits=limits))


@pytest.mark.parametrize("kind", ["local", "bwrap"])
async def test_a_full_disk_keeps_the_old_state_and_says_the_new_one_was_lost(
    sandbox_root: Path, kind: str
) -> None:
    root = sandbox_root / kind
    terminal = TerminalTool()
    async with SandboxPool(_backend(kind, root), PoolConfig(name="full", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")

        async def run(command: str) -> tuple[dict[str, object], bool]:
            result = await terminal(slot, {"command": command})
            return json.loads(result.content), result.is_error

        first, failed = await run("mkdir -p a b && cd a && export KEPT=1")
        assert (first["error"], failed) == (None, False)
        fill = await slot.exec("head -c 64000000 /dev/zero > fill", timeout=60)
        assert fill.exit_code != 0  # the 16 MiB slot is full now
        lost, failed = await run("cd ../b && export LOST=1 && echo ran")
        assert lost["output"] == "ran\n"  # the marker line is not shown to the model
        assert lost["exit_code"] == 0
        assert failed
        assert "could not be saved" in str(lost["error"])
        after, _ = await run('pwd; echo "kept=$KEPT lost=$LOST"')
        assert str(after["output"]).split() == [f"{slot.workspace}/a", "kept=1", "lost="]
        await slot.exec(f"rm -f {slot.workspace}/fill", timeout=30)
        again, failed = await run("cd ../b && export LOST=1")
        assert (again["error"], failed) == (None, False)
        saved, _ = await run('pwd; echo "lost=$LOST"')
        assert str(saved["output"]).split() == [f"{slot.workspace}/b", "lost=1"]
        await pool.release(slot)
    shutil.rmtree(root)
