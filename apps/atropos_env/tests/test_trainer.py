"""The trainer client's batch checks (what the e2e tests and docs rely on)."""

from __future__ import annotations

from hermes_atropos_env.trainer import batch_problems, summarize


def _group(**overrides):
    group = {
        "tokens": [[5, 6, 7]],
        "masks": [[-100, 6, 7]],
        "scores": [1.0],
        "inference_logprobs": [[1.0, -0.5, -0.1]],
        "group_overrides": {"token_source": "sampler"},
    }
    group.update(overrides)
    return group


def test_a_good_group_has_no_problems() -> None:
    assert batch_problems([_group()]) == []
    assert summarize([_group()])["trainable_tokens"] == 2


def test_each_misalignment_is_reported() -> None:
    assert "mask 9 != id 6" in batch_problems([_group(masks=[[-100, 9, 7]])])[0]
    assert "logprob 0.5 > 0" in batch_problems([_group(inference_logprobs=[[1.0, 0.5, -0.1]])])[0]
    assert "3/3/2 lengths" in batch_problems([_group(inference_logprobs=[[1.0, -0.5]])])[0]
    assert "nothing trainable" in batch_problems([_group(masks=[[-100] * 3])])[0]
    assert "missing" in batch_problems([_group(inference_logprobs=None)])[0]


def test_retokenized_groups_may_omit_logprobs() -> None:
    retok = _group(inference_logprobs=None, group_overrides={"token_source": "retokenized"})
    assert batch_problems([retok]) == []
