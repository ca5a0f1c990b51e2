"""The reward context: the agent's own slot plus what workspace setup recorded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio
from hermes_protocols import ExecResult, FileTransfer, Slot


class SlotRewardContext:
    """Implements :class:`hermes_protocols.RewardContext` over any :class:`Slot`.

    ``upload``/``download`` use the slot's own :class:`FileTransfer` when it has one and fall
    back to whole-file ``read_file``/``write_file`` otherwise (binary-safe either way).
    """

    def __init__(self, slot: Slot, setup_metadata: Mapping[str, Any]) -> None:
        self._slot = slot
        self._metadata = MappingProxyType(dict(setup_metadata))

    @property
    def slot(self) -> Slot:
        return self._slot

    @property
    def setup_metadata(self) -> Mapping[str, Any]:
        return self._metadata

    @property
    def slot_id(self) -> str:
        return self._slot.slot_id

    @property
    def workspace(self) -> str:
        return self._slot.workspace

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        return await self._slot.exec(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)

    async def read_file(self, path: str) -> bytes:
        return await self._slot.read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._slot.write_file(path, data)

    async def upload(self, local_path: str, remote_path: str) -> None:
        if isinstance(self._slot, FileTransfer):
            await self._slot.upload(local_path, remote_path)
            return
        data = await anyio.Path(local_path).read_bytes()
        await self._slot.write_file(remote_path, data)

    async def download(self, remote_path: str, local_path: str) -> None:
        if isinstance(self._slot, FileTransfer):
            await self._slot.download(remote_path, local_path)
            return
        data = await self._slot.read_file(remote_path)
        target = anyio.Path(Path(local_path))
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data)
