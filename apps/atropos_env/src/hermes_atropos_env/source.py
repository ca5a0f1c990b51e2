"""The adapter's seam to hermes-rl: where items come from and how a group is rolled out.

The Atropos environment only needs this Protocol; :mod:`hermes_atropos_env.wiring` builds the
real one from hermes-envs (registry + rollout runner), hermes-loop (agent loop, backends,
tokenizer), hermes-parsers and hermes-sandbox (slot pool).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from hermes_protocols import AgentResult, Item, ScoredRollout, TokenTrace

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig


@runtime_checkable
class RolloutSource(Protocol):
    """A started environment + agent + sandbox pool, ready to roll out groups."""

    @property
    def environment_name(self) -> str: ...

    def items(self, *, split: str, seed: int) -> Iterator[Item]:
        """Items of a split, deterministic for a seed (possibly endless)."""
        ...

    async def sync_weights(self) -> str | None:
        """Load the LoRA adapter file if it changed since the last call; the SHA-256 of the
        adapter generating from now on (``None``: the base weights)."""
        ...

    async def run_group(self, item: Item, group_size: int) -> Sequence[ScoredRollout]:
        """``group_size`` rollouts of one item, each in its own slot; never raises for a
        rollout's own failure (it comes back as a failed ``ScoredRollout``)."""
        ...

    def retokenize(self, result: AgentResult) -> TokenTrace:
        """Phase 1: rebuild a (``"retokenized"``) trace from a rollout's final messages, only
        its own turns trainable."""
        ...


class RolloutSourceFactory(Protocol):
    """Opens a :class:`RolloutSource` for a configuration; closing it releases everything
    (sandboxes, model, HTTP clients)."""

    def __call__(
        self, env: HermesAtroposEnvConfig, inference: InferenceConfig
    ) -> AbstractAsyncContextManager[RolloutSource]: ...
