"""Example rollouts for the test suites of every package and app: a scored one around a given
agent result, and one that failed for infrastructure reasons, with ids in the runner's
``env/item/index`` form.

Like :mod:`hermes_protocols.strategies`, nothing at run time imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping

from hermes_protocols import (
    AgentResult,
    FailureKind,
    Item,
    RolloutFailure,
    Score,
    ScoredRollout,
)


def scored_rollout(
    item: Item,
    group_index: int,
    result: AgentResult,
    reward: float,
    *,
    env: str,
    metrics: Mapping[str, float] | None = None,
    timings: Mapping[str, float] | None = None,
) -> ScoredRollout:
    """Group member ``group_index`` of ``item``: ``result``, scored ``reward``."""
    score = Score(reward=reward, metrics=dict(metrics or {}))
    return ScoredRollout(
        _id(item, group_index, env),
        env,
        item,
        group_index,
        result,
        score,
        timings=dict(timings or {}),
    )


def failed_rollout(
    item: Item,
    group_index: int,
    *,
    env: str,
    phase: str = "setup",
    message: str = "boom",
    attempts: int = 1,
) -> ScoredRollout:
    """Group member ``group_index`` of ``item``, failed in ``phase`` after ``attempts``."""
    failure = RolloutFailure(FailureKind.INFRASTRUCTURE, phase, message, attempts)
    return ScoredRollout(_id(item, group_index, env), env, item, group_index, None, None, failure)


def _id(item: Item, group_index: int, env: str) -> str:
    return f"{env}/{item.id}/{group_index}"
