"""Group building: alignment, exclusions, overlong handling, phase marking."""

from __future__ import annotations

import attrs
import hypothesis.strategies as st
import pytest
from hermes_atropos_env import Exclusion, GroupPolicy, build_group, truncate_trace
from hermes_protocols import FailureKind, TokenTrace
from hermes_protocols.formats import ATROPOS_MASKED as MASKED
from hermes_protocols.formats import MASKED_LOGPROB
from hypothesis import given


@st.composite
def traces(draw: st.DrawFn) -> TokenTrace:
    trace = TokenTrace().append_context(draw(st.lists(st.integers(0, 50_000), max_size=8)))
    for _ in range(draw(st.integers(1, 4))):
        ids = draw(st.lists(st.integers(0, 50_000), min_size=1, max_size=6))
        lps = draw(st.lists(st.floats(-30, 0), min_size=len(ids), max_size=len(ids)))
        trace = trace.append_generated(ids, lps)
        trace = trace.append_context(draw(st.lists(st.integers(0, 50_000), max_size=5)))
    return trace


@given(group=st.lists(traces(), min_size=1, max_size=4))
def test_phase2_group_is_exactly_the_sampled_traces(make_rollout, group) -> None:
    rollouts = [make_rollout(t, reward=float(i)) for i, t in enumerate(group)]
    outcome = build_group(rollouts, GroupPolicy(group_size=len(group), max_token_length=10_000))
    data = outcome.group
    assert data is not None
    assert data["scores"] == [float(i) for i in range(len(group))]
    assert data["group_overrides"]["token_source"] == "sampler"
    for trace, tokens, masks, lps in zip(
        group, data["tokens"], data["masks"], data["inference_logprobs"], strict=True
    ):
        assert tokens == list(trace.ids)
        assert len(tokens) == len(masks) == len(lps)
        for tok, m, mask, lp, want_lp in zip(
            tokens, trace.mask, masks, lps, trace.logprobs, strict=True
        ):
            if m:
                assert (mask, lp) == (tok, want_lp)
            else:
                assert (mask, lp) == (MASKED, MASKED_LOGPROB)


@given(trace=traces(), limit=st.integers(2, 40))
def test_truncate_keeps_ids_mask_logprobs_together(trace, limit) -> None:
    cut = truncate_trace(trace, limit)
    assert cut.ids == trace.ids[:limit]
    assert cut.mask == trace.mask[:limit]
    assert cut.logprobs == trace.logprobs[:limit]


def _long_trace(n_generated: int) -> TokenTrace:
    return (
        TokenTrace()
        .append_context([7] * 4)
        .append_generated([9] * n_generated, [-1.0] * n_generated)
    )


def test_overlong_dropped_by_default(make_rollout) -> None:
    rollouts = [make_rollout(_long_trace(2)), make_rollout(_long_trace(20))]
    outcome = build_group(rollouts, GroupPolicy(group_size=2, max_token_length=10))
    assert outcome.group is None
    assert outcome.exclusion_counts == {str(Exclusion.OVERLONG): 1}


def test_overlong_truncated_below_limit_with_mask_cut(make_rollout) -> None:
    rollouts = [make_rollout(_long_trace(2)), make_rollout(_long_trace(20))]
    policy = GroupPolicy(group_size=2, max_token_length=10, overlong_policy="truncate")
    outcome = build_group(rollouts, policy)
    assert outcome.group is not None
    assert outcome.truncated == 1
    assert [len(t) for t in outcome.group["tokens"]] == [6, 9]
    assert outcome.group["masks"][1] == [MASKED] * 4 + [9] * 5


def test_truncation_that_leaves_nothing_trainable_is_excluded(make_rollout) -> None:
    trace = TokenTrace().append_context([1] * 30).append_generated([2], [-0.1])
    policy = GroupPolicy(group_size=1, max_token_length=10, overlong_policy="truncate")
    outcome = build_group([make_rollout(trace)], policy)
    assert outcome.group is None
    assert outcome.exclusion_counts == {str(Exclusion.NOTHING_TRAINABLE): 1}


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"failure": FailureKind.INFRASTRUCTURE}, Exclusion.INFRASTRUCTURE),
        ({"failure": FailureKind.MODEL}, Exclusion.UNSCORED),
        ({"score_failure": FailureKind.INFRASTRUCTURE, "reward": 0.0}, Exclusion.INFRASTRUCTURE),
    ],
)
def test_failed_rollouts_never_become_zero_reward_data(make_rollout, kwargs, reason) -> None:
    rollouts = [make_rollout(reward=0.0), make_rollout(**kwargs)]
    outcome = build_group(rollouts, GroupPolicy(group_size=2, max_token_length=100))
    assert outcome.group is None, "an incomplete group must not be sent"
    assert [r for _, r in outcome.excluded] == [reason]
    one = build_group(rollouts, GroupPolicy(group_size=1, max_token_length=100))
    assert one.group is not None
    assert one.group["scores"] == [0.0]
    assert len(one.group["tokens"]) == 1


def test_model_failure_with_score_is_training_data(make_rollout) -> None:
    rollout = make_rollout(reward=0.0, score_failure=FailureKind.MODEL)
    outcome = build_group([rollout], GroupPolicy(group_size=1, max_token_length=100))
    assert outcome.group is not None
    assert outcome.group["scores"] == [0.0]


def test_phase2_refuses_missing_or_retokenized_traces(make_rollout) -> None:
    retok = TokenTrace(ids=[1, 2], mask=[0, 1], logprobs=[0.0, 0.0], source="retokenized")
    rollouts = [make_rollout(retok)]
    outcome = build_group(rollouts, GroupPolicy(group_size=1, max_token_length=100))
    assert [r for _, r in outcome.excluded] == [Exclusion.NOT_SAMPLER_EXACT]


def test_phase1_group_is_marked_retokenized_without_logprobs(make_rollout) -> None:
    seen = []

    def retokenize(result):
        seen.append(len(result.messages))
        return TokenTrace(ids=[5, 6, 7], mask=[0, 1, 1], logprobs=[0.0] * 3, source="retokenized")

    # chat-mode results carry no sampler-exact trace; the one the loop left is not trusted
    rollouts = [make_rollout(TokenTrace(ids=[1], mask=[1], logprobs=[-1.0])) for _ in range(2)]
    policy = GroupPolicy(group_size=2, max_token_length=100, token_mode=False)
    outcome = build_group(rollouts, policy, retokenize=retokenize)
    assert outcome.group is not None
    assert outcome.group["inference_logprobs"] is None
    assert outcome.group["group_overrides"]["token_source"] == "retokenized"
    assert outcome.group["generation_params"]["token_source"] == "retokenized"
    assert outcome.group["tokens"] == [[5, 6, 7], [5, 6, 7]]
    assert outcome.group["masks"] == [[MASKED, 6, 7], [MASKED, 6, 7]]
    assert seen == [5, 5]
    assert outcome.group["group_overrides"]["logprob_modes"] == []  # no logprobs, no mode


def test_a_groups_sampling_describes_every_member(make_rollout) -> None:
    rollouts = []
    for seed, missing in ((11, []), (12, [3])):
        rollout = make_rollout()
        sampling = {"temperature": 0.6, "seed": seed, "missing_logprobs": missing}
        result = attrs.evolve(rollout.result, metadata={"sampling": sampling})
        rollouts.append(attrs.evolve(rollout, result=result))
    outcome = build_group(rollouts, GroupPolicy(group_size=2, max_token_length=100))
    assert outcome.group is not None
    params = outcome.group["generation_params"]
    assert params["sampling"] == {"temperature": 0.6}  # what both members share
    assert [m["seed"] for m in params["sampling_by_member"]] == [11, 12]
    assert [m["missing_logprobs"] for m in params["sampling_by_member"]] == [[], [3]]


def test_messages_carry_tool_calls_and_reasoning(make_rollout) -> None:
    outcome = build_group([make_rollout()], GroupPolicy(group_size=1, max_token_length=100))
    assert outcome.group is not None
    messages = outcome.group["messages"][0]
    assert all("role" in m and "content" in m for m in messages)
    assert messages[2]["tool_calls"][0]["function"]["name"] == "terminal"
    assert messages[2]["reasoning_content"] == "I should run ls."


def test_missing_logprobs_are_not_trained_and_the_group_names_its_mode(make_rollout) -> None:
    trace = TokenTrace(logprob_mode="sampled").append_context([1, 2])
    trace = trace.append_generated([300, 208, 182], [-0.5, float("nan"), -0.25], missing=[1])
    outcome = build_group([make_rollout(trace)], GroupPolicy(group_size=1, max_token_length=100))
    data = outcome.group
    assert data is not None
    assert data["masks"] == [[MASKED, MASKED, 300, MASKED, 182]]
    assert data["inference_logprobs"] == [
        [MASKED_LOGPROB, MASKED_LOGPROB, -0.5, MASKED_LOGPROB, -0.25]
    ]
    assert data["group_overrides"]["logprob_modes"] == ["sampled"]
    cut = truncate_trace(trace, 3)
    assert cut.missing_logprobs == ()
    assert truncate_trace(trace, 4).missing_logprobs == (3,)
