"""A trainer adapter's view of a rollout: the verifier's reward (a model failure's 0.0
included), or an infrastructure failure that carries no reward at all."""

from __future__ import annotations

from hermes_protocols import FailureKind, Item, RolloutFailure, Score, ScoredRollout
from hermes_rollouts import RolloutOutcome, item_from_json, item_json

ITEM = Item(id="write_word-d1-1", data={"family": "write_word", "seed": 7}, split="train")


def scored(score: Score | None, failure: RolloutFailure | None = None) -> ScoredRollout:
    return ScoredRollout("r0", "endless_terminals", ITEM, 0, None, score, failure)


def test_a_judged_rollout_keeps_the_verifiers_reward_and_metrics() -> None:
    outcome = RolloutOutcome.of(scored(Score(1.0, {"checks_passed": 2.0})))
    assert (outcome.reward, dict(outcome.metrics), outcome.infrastructure) == (
        1.0,
        {"checks_passed": 2.0},
        None,
    )


def test_a_model_failure_is_a_zero_reward() -> None:
    outcome = RolloutOutcome.of(scored(Score(0.0, failure=FailureKind.MODEL, details="wrong")))
    assert (outcome.reward, outcome.infrastructure) == (0.0, None)


def test_an_infrastructure_failure_has_no_reward() -> None:
    failure = RolloutFailure(FailureKind.INFRASTRUCTURE, "setup", "the host went away", 2)
    outcome = RolloutOutcome.of(scored(None, failure))
    assert outcome.reward is None
    assert outcome.infrastructure == "setup: the host went away (after 2 attempts)"


def test_a_verify_the_sandbox_broke_has_no_reward() -> None:
    score = Score(0.0, failure=FailureKind.INFRASTRUCTURE, details="slot died")
    outcome = RolloutOutcome.of(scored(score))
    assert (outcome.reward, outcome.infrastructure) == (None, "verify: slot died")


def test_an_item_survives_its_json() -> None:
    assert item_from_json(item_json(ITEM)) == ITEM
