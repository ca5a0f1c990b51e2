"""One rollout in a session of its own, and its outcome in a trainer's terms.

For trainer adapters whose trainer hands over a model endpoint per rollout (verifiers'
interception server): the whole sandbox lifecycle runs here, as in every app (a slot acquired,
``setup_workspace``, the tools bound to the slot, ``verify`` on the same slot, the slot
released on every exit, cancellation included), and :class:`RolloutOutcome` splits the result
into a reward (the verifier's, also a model failure's 0.0) or an infrastructure failure that
must never be reported as a reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from hermes_protocols import Environment, FailureKind, Item, ScoredRollout

from hermes_rollouts.session import open_session
from hermes_rollouts.spec import RolloutSpec


@attrs.frozen(slots=True)
class RolloutOutcome:
    """A rollout as a trainer sees it: ``reward`` and ``metrics`` when the verifier judged
    it, else ``infrastructure`` (why it could not be judged) and no reward."""

    reward: float | None
    metrics: Mapping[str, float]
    infrastructure: str | None
    turns: int

    @classmethod
    def of(cls, rollout: ScoredRollout) -> RolloutOutcome:
        turns = rollout.result.turns if rollout.result is not None else 0
        failure = rollout.failure
        if failure is not None:
            message = f"{failure.phase}: {failure.message} (after {failure.attempts} attempts)"
            return cls(None, {}, message, turns)
        score = rollout.score
        assert score is not None  # a ScoredRollout has exactly one of score and failure
        if score.failure is FailureKind.INFRASTRUCTURE:  # the runner retries these first
            return cls(None, {}, f"verify: {score.details}", turns)
        return cls(score.reward, dict(score.metrics), None, turns)


def item_json(item: Item) -> dict[str, Any]:
    """``item`` as plain JSON (what a trainer's task record carries)."""
    return {"id": item.id, "data": dict(item.data), "split": item.split}


def item_from_json(data: Mapping[str, Any]) -> Item:
    """The item :func:`item_json` wrote."""
    return Item(id=str(data["id"]), data=dict(data["data"]), split=str(data["split"]))


async def run_single_rollout(
    spec: RolloutSpec, item: Item, *, seed: int, environment: Environment | None = None
) -> ScoredRollout:
    """One rollout of ``item`` in a session opened for it alone (no preflight: a dead model
    or sandbox ends as an infrastructure failure of this rollout) and closed after it."""
    async with open_session(spec, preflight=False, environment=environment) as session:
        return await session.run_rollout(item, seed=seed)
