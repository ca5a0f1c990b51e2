"""Write-time filters hermes-agent users rely on; a dropped rollout goes to ``filtered.jsonl``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


def has_reasoning(record: Mapping[str, Any]) -> bool:
    """Whether any assistant turn of the record carries non-empty reasoning."""
    reasoning = record.get("reasoning") or []
    if any(isinstance(r, str) and r.strip() for r in reasoning):
        return True
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("reasoning_content")
        for m in record.get("messages") or []
    )


@attrs.frozen(slots=True)
class WriteFilters:
    """``require_reasoning`` drops rollouts with no reasoning at all; ``min_reward`` drops
    scored rollouts below it. Failed rollouts are never filtered (they go to ``failed.jsonl``)."""

    require_reasoning: bool = False
    min_reward: float | None = None

    def reason(self, record: Mapping[str, Any]) -> str | None:
        """Why ``record`` is dropped (``"no_reasoning"``, ``"min_reward"``), or ``None``."""
        if self.require_reasoning and not has_reasoning(record):
            return "no_reasoning"
        reward = record.get("reward")
        if self.min_reward is not None and (reward is None or reward < self.min_reward):
            return "min_reward"
        return None
