"""Where a step's rollouts come from, and how the updated weights get back to the sampler.

Three sources implement :class:`BatchSource`: :mod:`hermes_trainer.live` samples with the
embedded model in this process and hot-loads each adapter; :mod:`hermes_trainer.atropos_feed`
pulls the groups an Atropos environment sent to ``run-api`` (the environment reloads the
adapter file the trainer rewrites); :mod:`hermes_trainer.trajectories` reads a batch runner's
``trajectories.jsonl`` (offline: nothing samples again).

The learner behind :class:`Learner` is the local JAX LoRA (:class:`LocalLearner`, its adapter
a GGUF file) or a Tinker training client (:mod:`hermes_trainer.tinker_api`, its weights a
``tinker://`` path); either way the source gets what the learner saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.to_thread
import attrs

from hermes_trainer.grpo import TrainGroup
from hermes_trainer.lora import write_gguf_adapter
from hermes_trainer.samples import Sample

if TYPE_CHECKING:  # the learner loads JAX, which the command line's option checks do not need
    from hermes_trainer.learner import LoraLearner, UpdateStats

#: saved weights: an adapter file (local learner) or a ``tinker://`` path
Weights = Path | str


@attrs.frozen(kw_only=True)
class Collected:
    """One step's groups, the tokens the policy generated for them (``None``: not known) and
    the seconds spent getting them; ``policy_lag``: how many updates behind the weights that
    sampled them were, on average (``None``: not known)."""

    groups: tuple[tuple[Sample, ...], ...]
    generated_tokens: int | None
    seconds: float
    policy_lag: float | None = None


class BatchSource(Protocol):
    """A started source of training groups."""

    async def collect(self, step: int) -> Collected | None:
        """The groups of step ``step`` (1-based); ``None`` when the source has no more."""
        ...

    async def publish(self, adapter: Weights, step: int) -> None:
        """The weights saved after step ``step`` are at ``adapter`` (a file is replaced
        atomically)."""
        ...


class Learner(Protocol):
    """What updates the policy and saves it for the sampler."""

    async def update(self, groups: Sequence[TrainGroup]) -> UpdateStats:
        """One optimizer step on ``groups``; what it measured before the weights changed."""
        ...

    async def save(self, step: int) -> Weights:
        """Save the current weights for sampling; where they are."""
        ...


class LocalLearner:
    """The JAX LoRA learner in worker threads; its adapter is written to ``path`` as a GGUF
    (atomically replaced) after every update."""

    def __init__(self, learner: LoraLearner, path: Path, alpha: float) -> None:
        self.learner = learner
        self.path = path
        self.alpha = alpha

    async def update(self, groups: Sequence[TrainGroup]) -> UpdateStats:
        return await anyio.to_thread.run_sync(self.learner.update, groups)

    async def save(self, step: int) -> Path:
        arrays = self.learner.lora_arrays()
        return await anyio.to_thread.run_sync(write_gguf_adapter, self.path, arrays, self.alpha)
