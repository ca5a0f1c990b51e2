"""Training batches from every source's records: advantages, SFT selection, dropped groups,
failed rollouts, and fidelity checks that refuse what is not sampler-exact."""

from __future__ import annotations

from typing import Any

import pytest
from hermes_protocols import (
    AgentResult,
    Item,
    ScoredRollout,
    StopReason,
    TokenTrace,
)
from hermes_protocols.examples import failed_rollout, scored_rollout
from hermes_trainer.grpo import build_batch, group_advantages
from hermes_trainer.samples import (
    FidelityError,
    Sample,
    from_atropos_group,
    from_rollout,
    from_trajectory,
)

pytestmark = pytest.mark.slow

TRACE = TokenTrace().append_context([1, 2, 3]).append_generated([4, 5], [-0.5, -1.5])


def _rollout(
    reward: float | None, trace: TokenTrace | None = TRACE, index: int = 0
) -> ScoredRollout:
    result = AgentResult(messages=(), stop_reason=StopReason.FINAL_ANSWER, turns=1, trace=trace)
    if reward is None:
        return failed_rollout(Item(id="i"), index, env="e")
    return scored_rollout(Item(id="i"), index, result, reward, env="e")


def _samples(*rewards: float | None) -> list[Sample]:
    return [from_rollout(_rollout(r, index=i), 0.6) for i, r in enumerate(rewards)]


def test_advantages_are_rewards_minus_the_group_mean() -> None:
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]


def test_groups_of_equal_rewards_drop_and_failed_rollouts_never_train() -> None:
    batch = build_batch([_samples(1.0, 0.0, None), _samples(0.0, 0.0), _samples(1.0, None)])
    assert batch.dropped_groups == 2
    assert batch.failed_rollouts == 2
    assert batch.rewards == (1.0, 0.0, 0.0, 0.0, 1.0)
    (group,) = batch.groups
    assert group.temperature == 0.6
    assert [s.advantage for s in group.sequences] == [0.5, -0.5]
    first = group.sequences[0]
    assert first.ids == (1, 2, 3, 4, 5)
    assert first.mask == (0, 0, 0, 1, 1)
    assert first.sampler_logprobs == (0.0, 0.0, 0.0, -0.5, -1.5)
    assert first.trainable == 2


def test_sft_trains_the_rollouts_that_reach_min_reward_even_in_an_all_solved_group() -> None:
    batch = build_batch(
        [_samples(1.0, 1.0), _samples(0.0, 0.5, 1.0), _samples(0.0, 0.0)],
        objective="sft",
        min_reward=0.5,
    )
    assert batch.dropped_groups == 1
    assert [len(g.sequences) for g in batch.groups] == [2, 2]
    assert {s.advantage for g in batch.groups for s in g.sequences} == {1.0}


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
        (TokenTrace(ids=(1, 2), mask=(0, 1), logprobs=(0.0, 0.5)), "logprob 0.5"),
    ],
)
def test_a_trace_that_is_not_sampler_exact_is_an_error(trace: TokenTrace | None, says: str) -> None:
    with pytest.raises(FidelityError, match=says):
        from_rollout(_rollout(1.0, trace), 0.6)


def _atropos_group(**changes: Any) -> dict[str, Any]:
    group: dict[str, Any] = {
        "tokens": [[1, 2, 3, 4], [1, 2, 7]],
        "masks": [[-100, -100, 3, 4], [-100, -100, 7]],
        "inference_logprobs": [[1.0, 1.0, -0.25, -0.5], [1.0, 1.0, -2.0]],
        "scores": [1.0, 0.0],
        "generation_params": {"sampling": {"temperature": 0.8}},
        "group_overrides": {"token_source": "sampler", "logprob_modes": ["sampled"]},
    }
    return {**group, **changes}


def test_an_atropos_group_becomes_samples_with_its_masks_logprobs_and_temperature() -> None:
    first, second = from_atropos_group(_atropos_group(), "g")
    assert first.mask == (0, 0, 1, 1)
    assert first.logprobs == (0.0, 0.0, -0.25, -0.5)  # atroposlib's 1.0 filler is not kept
    assert (first.reward, second.reward) == (1.0, 0.0)
    assert first.temperature == 0.8
    (group,) = build_batch([[first, second]]).groups
    assert [s.advantage for s in group.sequences] == [0.5, -0.5]


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"group_overrides": {"token_source": "retokenized"}}, "not sampler-exact"),
        ({"group_overrides": {"token_source": "sampler", "logprob_modes": ["raw"]}}, "raw"),
        ({"scores": [1.0]}, "differ in count"),
        ({"generation_params": {}}, "temperature"),
        ({"masks": [[-100, -100, 3, 5], [-100, -100, 7]]}, "not its token"),
        ({"inference_logprobs": [[1.0, 1.0, -0.25, 1.0], [1.0, 1.0, -2.0]]}, "logprob 1.0"),
    ],
)
def test_an_atropos_group_that_is_not_exact_is_an_error(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(FidelityError, match=says):
        from_atropos_group(_atropos_group(**changes), "g")


def _record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": "endless_terminals/x/0",
        "reward": 1.0,
        "tokens": [1, 2, 3],
        "masks": [0, 1, 1],
        "logprobs": [0.0, -0.1, -0.2],
        "token_source": "sampler",
        "logprob_mode": "sampled",
        "sampling": {"temperature": 1.0, "missing_logprobs": []},
    }
    return {**record, **changes}


def test_a_trajectory_record_becomes_a_sample() -> None:
    sample = from_trajectory(_record())
    assert (sample.ids, sample.mask, sample.logprobs) == ((1, 2, 3), (0, 1, 1), (0.0, -0.1, -0.2))
    assert (sample.reward, sample.temperature) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"token_source": "retokenized"}, "token-mode runs"),
        ({"token_source": None}, "token-mode runs"),
        ({"sampling": {"temperature": 1.0, "missing_logprobs": [2]}}, "did not return"),
        ({"masks": [0, 1]}, "2 mask entries"),
        ({"sampling": {}}, "temperature"),
    ],
)
def test_a_trajectory_that_is_not_exact_is_an_error(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(FidelityError, match=says):
        from_trajectory(_record(**changes))


def test_a_group_sampled_at_two_temperatures_is_an_error() -> None:
    hot = from_trajectory(_record(sampling={"temperature": 1.0}))
    cold = from_trajectory(_record(reward=0.0, sampling={"temperature": 0.5}))
    with pytest.raises(FidelityError, match="several temperatures"):
        build_batch([[hot, cold]])
