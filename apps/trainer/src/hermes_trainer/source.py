"""Where a step's rollouts come from, and how the updated weights get back to the sampler.

Three sources implement :class:`BatchSource`: :mod:`hermes_trainer.live` samples with the
embedded model in this process and hot-loads each adapter; :mod:`hermes_trainer.atropos_feed`
pulls the groups an Atropos environment sent to ``run-api`` (the environment reloads the
adapter file the trainer rewrites); :mod:`hermes_trainer.trajectories` reads a batch runner's
``trajectories.jsonl`` (offline: nothing samples again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from hermes_trainer.samples import Sample


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

    async def publish(self, adapter: Path, step: int) -> None:
        """The adapter written after step ``step`` is at ``adapter`` (replaced atomically)."""
        ...
