"""From groups of scored samples to training groups: advantages, dropped groups.

A group is the rollouts of one item (:mod:`hermes_trainer.samples`). For ``grpo`` its
advantages are ``reward - mean(group rewards)`` (no division by the standard deviation, so a
group's weight does not grow as its rewards get close); a group whose scored rollouts all have
the same reward (or that has fewer than two) carries no signal and is dropped. For ``sft`` the
rollouts with ``reward >= min_reward`` train (advantage 1) and a group with none is dropped.
Failed rollouts (no reward) never train.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from hermes_trainer.packing import TrainSequence
from hermes_trainer.samples import Sample, group_temperature

Objective = Literal["grpo", "sft"]


@attrs.frozen(kw_only=True)
class TrainGroup:
    """The sequences of one group (they share their prompt) and their sampling temperature."""

    sequences: tuple[TrainSequence, ...]
    temperature: float


@attrs.frozen(kw_only=True)
class Batch:
    """The groups that train, and what the others were."""

    groups: tuple[TrainGroup, ...]
    rewards: tuple[float, ...]
    dropped_groups: int
    failed_rollouts: int


def group_advantages(rewards: Sequence[float]) -> list[float]:
    mean = sum(rewards) / len(rewards)
    return [reward - mean for reward in rewards]


def _weights(rewards: Sequence[float], objective: Objective, min_reward: float) -> list[float]:
    """Each scored rollout's advantage (0: does not train); empty when the group drops."""
    if objective == "sft":
        weights = [1.0 if reward >= min_reward else 0.0 for reward in rewards]
        return weights if any(weights) else []
    if len(rewards) < 2 or len(set(rewards)) == 1:
        return []
    return group_advantages(rewards)


def build_batch(
    groups: Sequence[Sequence[Sample]], *, objective: Objective = "grpo", min_reward: float = 1.0
) -> Batch:
    """Training groups from finished groups (see the module doc)."""
    kept: list[TrainGroup] = []
    rewards: list[float] = []
    dropped = failed = 0
    for group in groups:
        scored = [s for s in group if s.reward is not None]
        failed += len(group) - len(scored)
        values = [s.reward for s in scored if s.reward is not None]
        rewards.extend(values)
        weights = _weights(values, objective, min_reward)
        sequences = tuple(
            TrainSequence(
                ids=sample.ids, mask=sample.mask, sampler_logprobs=sample.logprobs, advantage=w
            )
            for sample, w in zip(scored, weights, strict=False)
            if w != 0.0 or objective == "grpo"
        )
        if not weights or not any(s.trainable for s in sequences):
            dropped += 1
            continue
        kept.append(TrainGroup(sequences=sequences, temperature=group_temperature(scored)))
    return Batch(
        groups=tuple(kept), rewards=tuple(rewards), dropped_groups=dropped, failed_rollouts=failed
    )
