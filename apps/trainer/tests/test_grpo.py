"""GRPO batches from scored rollouts: advantages, dropped groups, failed rollouts, fidelity."""

from __future__ import annotations

import pytest
from hermes_protocols import (
    AgentResult,
    FailureKind,
    Item,
    RolloutFailure,
    Score,
    ScoredRollout,
    StopReason,
    TokenTrace,
)
from hermes_trainer.grpo import FidelityError, build_batch, group_advantages

TRACE = TokenTrace().append_context([1, 2, 3]).append_generated([4, 5], [-0.5, -1.5])


def _rollout(
    reward: float | None, trace: TokenTrace | None = TRACE, index: int = 0
) -> ScoredRollout:
    result = AgentResult(messages=(), stop_reason=StopReason.FINAL_ANSWER, turns=1, trace=trace)
    if reward is None:
        failure = RolloutFailure(kind=FailureKind.INFRASTRUCTURE, phase="setup", message="boom")
        return ScoredRollout(
            id=f"r{index}",
            env="e",
            item=Item(id="i"),
            group_index=index,
            result=None,
            score=None,
            failure=failure,
        )
    return ScoredRollout(
        id=f"r{index}",
        env="e",
        item=Item(id="i"),
        group_index=index,
        result=result,
        score=Score(reward=reward),
    )


def test_advantages_are_rewards_minus_the_group_mean() -> None:
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]


def test_groups_of_equal_rewards_drop_and_failed_rollouts_never_train() -> None:
    mixed = [_rollout(1.0, index=0), _rollout(0.0, index=1), _rollout(None, index=2)]
    equal = [_rollout(0.0), _rollout(0.0, index=1)]
    lonely = [_rollout(1.0), _rollout(None, index=1)]
    batch = build_batch([mixed, equal, lonely])
    assert batch.dropped_groups == 2
    assert batch.failed_rollouts == 2
    assert batch.rewards == (1.0, 0.0, 0.0, 0.0, 1.0)
    (group,) = batch.groups
    assert [s.advantage for s in group] == [0.5, -0.5]
    assert group[0].ids == (1, 2, 3, 4, 5)
    assert group[0].mask == (0, 0, 0, 1, 1)
    assert group[0].sampler_logprobs == (0.0, 0.0, 0.0, -0.5, -1.5)
    assert group[0].trainable == 2


@pytest.mark.parametrize(
    ("trace", "says"),
    [
        (None, "no token trace"),
        (
            TokenTrace(ids=(1, 2), mask=(0, 1), logprobs=(0.0, -1.0), source="retokenized"),
            "retokenized",
        ),
        (
            TokenTrace(
                ids=(1, 2), mask=(0, 1), logprobs=(0.0, float("nan")), missing_logprobs=(1,)
            ),
            "lacks 1 logprobs",
        ),
        (
            TokenTrace(ids=(1, 2), mask=(0, 1), logprobs=(0.0, -1.0), logprob_mode="raw"),
            "raw logprobs",
        ),
    ],
)
def test_a_trace_that_is_not_sampler_exact_is_an_error(trace: TokenTrace | None, says: str) -> None:
    with pytest.raises(FidelityError, match=says):
        build_batch([[_rollout(1.0, trace), _rollout(0.0, index=1)]])
