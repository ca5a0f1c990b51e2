"""From scored rollouts to training sequences: group-relative advantages, dropped groups.

A group is the rollouts of one item. Its advantages are ``reward - mean(group rewards)`` (no
division by the standard deviation, so a group's weight does not grow as its rewards get
close). A group whose scored rollouts all have the same reward (or that has fewer than two)
carries no signal and is dropped; failed rollouts (no score) never train.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from hermes_protocols import ScoredRollout, TokenTrace

from hermes_trainer.packing import TrainSequence


class FidelityError(Exception):
    """A rollout's token trace cannot be trained on as it is (not the sampler's exact tokens,
    or missing logprobs): a bug upstream, never something to skip silently."""


@attrs.frozen(kw_only=True)
class Batch:
    """The groups that train, and what the others were."""

    groups: tuple[tuple[TrainSequence, ...], ...]
    rewards: tuple[float, ...]
    dropped_groups: int
    failed_rollouts: int


def exact_trace(rollout: ScoredRollout) -> TokenTrace:
    """The rollout's trace, checked to be sampler-exact with every logprob present."""
    trace = rollout.result.trace if rollout.result is not None else None
    if trace is None:
        raise FidelityError(f"rollout {rollout.id} has no token trace (token mode is required)")
    if trace.source != "sampler":
        raise FidelityError(f"rollout {rollout.id} was retokenized; only sampler ids train")
    if trace.missing_logprobs:
        raise FidelityError(f"rollout {rollout.id} lacks {len(trace.missing_logprobs)} logprobs")
    if trace.logprob_mode not in (None, "sampled"):
        raise FidelityError(
            f"rollout {rollout.id} has {trace.logprob_mode} logprobs; the trainer needs the "
            "sampled distribution's"
        )
    return trace


def group_advantages(rewards: Sequence[float]) -> list[float]:
    mean = sum(rewards) / len(rewards)
    return [reward - mean for reward in rewards]


def build_batch(groups: Sequence[Sequence[ScoredRollout]]) -> Batch:
    """Training groups from finished rollout groups (see the module doc)."""
    kept: list[tuple[TrainSequence, ...]] = []
    rewards: list[float] = []
    dropped = failed = 0
    for group in groups:
        scored = [r for r in group if r.score is not None]
        failed += len(group) - len(scored)
        values = [r.score.reward for r in scored if r.score is not None]
        rewards.extend(values)
        if len(values) < 2 or len(set(values)) == 1:
            dropped += 1
            continue
        sequences = []
        for rollout, advantage in zip(scored, group_advantages(values), strict=True):
            trace = exact_trace(rollout)
            sequences.append(
                TrainSequence(
                    ids=trace.ids,
                    mask=trace.mask,
                    sampler_logprobs=trace.logprobs,
                    advantage=advantage,
                )
            )
        kept.append(tuple(sequences))
    return Batch(
        groups=tuple(kept), rewards=tuple(rewards), dropped_groups=dropped, failed_rollouts=failed
    )
