"""What a run needs from the real packages, as one small Protocol the app wires."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hermes_protocols import Item, ScoredRollout

from hermes_batch_runner.config import RunConfig


class Components(Protocol):
    """The environment's items and a way to run one rollout of one of them."""

    @property
    def env_name(self) -> str: ...

    @property
    def items(self) -> Sequence[Item]: ...

    @property
    def model(self) -> str:
        """The model name recorded in every trajectory."""
        ...

    async def run_one(self, item: Item, item_index: int, group_index: int) -> ScoredRollout:
        """One rollout; failures are reported in the result, never raised."""
        ...


@runtime_checkable
class SavesTokenizer(Protocol):
    """Optional capability: components that know their tokenizer save its ``tokenizer.json``
    into the run directory, so ``hermes-report RUN`` shows token text without arguments."""

    async def save_tokenizer(self, target: Path) -> bool:
        """Copy ``tokenizer.json`` to ``target``; ``False`` when there is none to copy."""
        ...


class Wiring(Protocol):
    """Builds (and on exit tears down) the components for a config."""

    def __call__(self, config: RunConfig, /) -> AbstractAsyncContextManager[Components, Any]: ...
