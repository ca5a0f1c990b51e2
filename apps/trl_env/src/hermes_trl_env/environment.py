"""The class TRL's ``GRPOTrainer(environment_factory=...)`` instantiates: one instance per
concurrent rollout, reused across batches. ``reset(**row)`` opens an episode of the row's item
(a sandbox slot acquired and ``setup_workspace`` run before the first turn), its public methods
are our tools bound to that slot, and ``get_reward()`` runs our ``verify`` on the same slot and
releases it. An episode whose infrastructure failed gets no reward (``None``: TRL turns it into
NaN and leaves it out), never 0.0; the :class:`EpisodeLedger` says why."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from hermes_rollouts import (
    BlockingEpisodes,
    RolloutOutcome,
    derive_seed,
    item_from_json,
)

from hermes_trl_env.tool_methods import tool_method

#: the class name TRL logs the reward under (``rewards/HermesEpisode/mean``)
CLASS_NAME = "HermesEpisode"


@attrs.define
class EpisodeLedger:
    """Every finished episode's outcome, in the order ``get_reward`` returned them, and every
    tool result our tools gave TRL, in the order they ran."""

    outcomes: list[RolloutOutcome] = attrs.field(factory=list)
    tool_results: list[str] = attrs.field(factory=list)

    @property
    def infrastructure_failures(self) -> list[str]:
        return [o.infrastructure for o in self.outcomes if o.infrastructure is not None]


def environment_factory(
    episodes: BlockingEpisodes, ledger: EpisodeLedger, *, seed: int = 0
) -> Callable[[], Any]:
    """The class for ``environment_factory``: its tools are ``episodes``' tools."""
    counter = itertools.count()

    def init(self: Any) -> None:
        self._episode = None

    def reset(self: Any, **row: Any) -> None:
        _abort(self)
        item = item_from_json(row["item"])
        episode_seed = derive_seed(seed, f"{item.id}/{next(counter)}")
        self._episode = episodes.start(item, seed=episode_seed)

    def get_reward(self: Any) -> float | None:
        episode, self._episode = self._episode, None
        if episode is None:
            raise RuntimeError("get_reward() before reset()")
        outcome = episodes.finish(episode)
        ledger.outcomes.append(outcome)
        return outcome.reward

    def _call(self: Any, name: str, arguments: Mapping[str, Any]) -> str:
        if self._episode is None:
            raise RuntimeError(f"tool {name!r} called outside an episode")
        result = episodes.call(self._episode, name, arguments)
        ledger.tool_results.append(result)
        return result

    def _abort(self: Any) -> None:
        episode, self._episode = self._episode, None
        if episode is not None:
            episodes.abort(episode)

    members: dict[str, Any] = {
        "__init__": init,
        "__doc__": __doc__,
        "reset": reset,
        "get_reward": get_reward,
        "_call": _call,
        "_abort": _abort,
    }
    for schema in episodes.host.tool_schemas:
        if schema.name in members:
            raise ValueError(f"tool {schema.name!r} clashes with TRL's environment methods")
        members[schema.name] = tool_method(schema)
    environment_class: Callable[[], Any] = type(CLASS_NAME, (), members)
    return environment_class
