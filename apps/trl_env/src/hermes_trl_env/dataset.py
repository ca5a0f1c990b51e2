"""The rows GRPOTrainer trains on: each item of our environment with the messages our spec shows
before the first turn (system prompt and prefill included) and the item itself, which
``reset(**row)`` turns back into an episode."""

from __future__ import annotations

import itertools
from typing import Any

from hermes_rollouts import BlockingEpisodes, item_json, message_dict


def episode_rows(
    episodes: BlockingEpisodes, *, count: int, split: str = "train", seed: int = 0
) -> list[dict[str, Any]]:
    """The first ``count`` items of ``split`` (deterministic for ``seed``) as TRL rows."""
    host = episodes.host
    items = itertools.islice(host.environment.items(seed=seed, split=split), count)
    return [
        {"prompt": [message_dict(m) for m in host.prompt(item)], "item": item_json(item)}
        for item in items
    ]
