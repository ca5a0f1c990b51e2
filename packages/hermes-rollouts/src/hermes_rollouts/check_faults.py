"""The environment check's injected fault: a slot that fails once the agent is done, so the
verifier meets a sandbox that cannot run anything (as a crashed host looks to it).

:class:`FaultyPool` wraps a real pool; :class:`BreakAfterAgent` wraps the agent and breaks
every slot the pool handed out when the agent returns. From then on each operation on those
slots raises :class:`~hermes_protocols.SandboxError`; the real slots are released untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hermes_envs import SlotRewardContext
from hermes_protocols import (
    Agent,
    AgentResult,
    ExecResult,
    Message,
    PoolStats,
    SandboxError,
    Slot,
    SlotPool,
    ToolExecutor,
    ToolSchema,
)

FAULT = "injected by hermes-envs check: the sandbox host is gone"


class _Fault:
    """Whether the slots are broken, and how many operations hit them since."""

    def __init__(self) -> None:
        self.broken = False
        self.hits = 0

    def check(self) -> None:
        if self.broken:
            self.hits += 1
            raise SandboxError(FAULT)


class _FaultySlot:
    """A slot that raises :class:`SandboxError` for every operation once broken."""

    def __init__(self, inner: Slot, fault: _Fault) -> None:
        self.inner = inner
        self._fault = fault
        self._files = SlotRewardContext(inner, {})

    @property
    def slot_id(self) -> str:
        return self.inner.slot_id

    @property
    def workspace(self) -> str:
        return self.inner.workspace

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._fault.check()
        return await self.inner.exec(command, timeout=timeout, cwd=cwd, env=env, stdin=stdin)

    async def read_file(self, path: str) -> bytes:
        self._fault.check()
        return await self.inner.read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        self._fault.check()
        await self.inner.write_file(path, data)

    async def upload(self, local_path: str, remote_path: str) -> None:
        self._fault.check()
        await self._files.upload(local_path, remote_path)

    async def download(self, remote_path: str, local_path: str) -> None:
        self._fault.check()
        await self._files.download(remote_path, local_path)


class FaultyPool:
    """A :class:`~hermes_protocols.SlotPool` over ``inner`` whose slots :meth:`break_slots`
    breaks (see the module doc)."""

    def __init__(self, inner: SlotPool) -> None:
        self._inner = inner
        self._fault = _Fault()

    async def __aenter__(self) -> FaultyPool:
        return self  # the inner pool is opened and closed by its owner

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    @property
    def hits(self) -> int:
        """Operations that met a broken slot."""
        return self._fault.hits

    def break_slots(self) -> None:
        self._fault.broken = True

    async def acquire(self, trajectory_id: str, **kwargs: Any) -> Slot:
        return _FaultySlot(await self._inner.acquire(trajectory_id, **kwargs), self._fault)

    async def release(self, slot: Slot, **kwargs: Any) -> None:
        inner = slot.inner if isinstance(slot, _FaultySlot) else slot
        await self._inner.release(inner, **kwargs)

    def stats(self) -> PoolStats:
        return self._inner.stats()


class BreakAfterAgent:
    """Runs ``inner``, then breaks ``pool``'s slots: the verifier gets a dead sandbox."""

    def __init__(self, inner: Agent, pool: FaultyPool) -> None:
        self._inner = inner
        self._pool = pool

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        try:
            return await self._inner.run(messages, tools=tools, executor=executor, seed=seed)
        finally:
            self._pool.break_slots()
