"""SlotRewardContext: the agent's slot plus setup metadata; binary-safe transfers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hermes_envs import SlotRewardContext
from hermes_protocols import ExecResult, FileTransfer, RewardContext

pytestmark = pytest.mark.anyio


class _NoTransferSlot:
    """Only the Slot methods, so the context must fall back to read/write_file."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def slot_id(self) -> str:
        return str(self._inner.slot_id)

    @property
    def workspace(self) -> str:
        return str(self._inner.workspace)

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        result: ExecResult = await self._inner.exec(
            command, timeout=timeout, cwd=cwd, env=env, stdin=stdin
        )
        return result

    async def read_file(self, path: str) -> bytes:
        data: bytes = await self._inner.read_file(path)
        return data

    async def write_file(self, path: str, data: bytes) -> None:
        await self._inner.write_file(path, data)


@pytest.mark.parametrize("wrap", [False, True], ids=["slot-transfer", "fallback"])
async def test_binary_round_trip_and_metadata(wrap: bool, pool: Any, tmp_path: Path) -> None:
    slot = await pool.acquire("ctx")
    try:
        target = _NoTransferSlot(slot) if wrap else slot
        assert isinstance(target, FileTransfer) is (not wrap)
        ctx = SlotRewardContext(target, {"answer": 42})
        assert isinstance(ctx, RewardContext)
        assert ctx.setup_metadata["answer"] == 42
        blob = bytes(range(256)) * 4096 + b"\x00\xff"
        source = tmp_path / "blob.bin"
        source.write_bytes(blob)
        await ctx.upload(str(source), "in/blob.bin")
        size = await ctx.exec("stat -c %s in/blob.bin", timeout=10)
        assert size.stdout.strip() == str(len(blob))
        await ctx.download("in/blob.bin", str(tmp_path / "out" / "copy.bin"))
        assert (tmp_path / "out" / "copy.bin").read_bytes() == blob
        assert ctx.slot_id == slot.slot_id
        assert ctx.workspace == slot.workspace
    finally:
        await pool.release(slot)
