"""The environment check's injected fault: the verifier meets a sandbox that cannot run
anything, as a crashed host looks to it.

:class:`DeadSandboxVerify` wraps the environment: its ``verify`` gets a reward context whose
every operation raises :class:`~hermes_protocols.SandboxError` (the real slot is untouched and
released as usual). The runner must turn that into an infrastructure failure, never a reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from hermes_envs import WrappedEnvironment
from hermes_protocols import AgentResult, ExecResult, Item, RewardContext, SandboxError, Score

FAULT = "injected by hermes-envs check: the sandbox host is gone"


@attrs.define
class _Hits:
    """Operations the verifier tried on the dead sandbox."""

    count: int = 0


class _DeadContext:
    """A :class:`~hermes_protocols.RewardContext` whose slot operations all fail."""

    def __init__(self, live: RewardContext, hits: _Hits) -> None:
        self._live = live
        self._hits = hits

    def _fail(self) -> SandboxError:
        self._hits.count += 1
        return SandboxError(FAULT)

    @property
    def slot_id(self) -> str:
        return self._live.slot_id

    @property
    def workspace(self) -> str:
        return self._live.workspace

    @property
    def setup_metadata(self) -> Mapping[str, Any]:
        return self._live.setup_metadata

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        raise self._fail()

    async def read_file(self, path: str) -> bytes:
        raise self._fail()

    async def write_file(self, path: str, data: bytes) -> None:
        raise self._fail()

    async def upload(self, local_path: str, remote_path: str) -> None:
        raise self._fail()

    async def download(self, remote_path: str, local_path: str) -> None:
        raise self._fail()


@attrs.frozen(slots=True)
class DeadSandboxVerify(WrappedEnvironment):
    """``inner`` whose ``verify`` meets a dead sandbox; ``hits`` counts what it tried there."""

    hits: _Hits = attrs.field(factory=_Hits, eq=False)

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        return await self.inner.verify(item, result, _DeadContext(ctx, self.hits))
