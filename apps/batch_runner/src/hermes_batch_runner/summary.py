"""``summary.json``: counts, reward and pass-rate statistics, tokens, tool errors, throughput."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import JSONObject

PASS_THRESHOLD = 1.0


@attrs.frozen(slots=True)
class SessionStats:
    """What this process did: wall time, rollouts it finished, tokens it generated."""

    wall_s: float
    rollouts: int
    generated_tokens: int
    interrupted: bool = False
    cancelled_in_flight: int = 0


def _reward_stats(rewards: Sequence[float]) -> JSONObject:
    if not rewards:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None, "pass_rate": None}
    return {
        "count": len(rewards),
        "mean": math.fsum(rewards) / len(rewards),
        "std": statistics.pstdev(rewards),
        "min": min(rewards),
        "max": max(rewards),
        "pass_rate": sum(r >= PASS_THRESHOLD for r in rewards) / len(rewards),
        "pass_threshold": PASS_THRESHOLD,
    }


def generated_tokens(record: Mapping[str, Any]) -> int:
    """Tokens the model generated in one rollout (trainable tokens in token mode)."""
    masks = record.get("masks")
    if isinstance(masks, list):
        return sum(1 for m in masks if m == 1)
    value = record.get("completion_tokens", 0)
    return value if isinstance(value, int) else 0


def build_summary(
    *,
    expected: int,
    kept: Sequence[Mapping[str, Any]],
    failed: Sequence[Mapping[str, Any]],
    filtered: Sequence[Mapping[str, Any]],
    session: SessionStats,
) -> JSONObject:
    """The summary of a run directory's three logs plus this session's throughput."""
    scored = [*kept, *filtered]
    rewards = [float(r["reward"]) for r in scored if isinstance(r.get("reward"), int | float)]
    failures = Counter(
        f"{r['failure'].get('kind')}:{r['failure'].get('phase')}"
        for r in failed
        if isinstance(r.get("failure"), dict)
    )
    filter_reasons = Counter(str(r.get("filter_reason")) for r in filtered)
    stop_reasons = Counter(str(r.get("stop_reason")) for r in scored)
    tool_errors = Counter(
        str(e.get("kind"))
        for r in scored
        for e in r.get("tool_errors") or []
        if isinstance(e, dict)
    )
    tool_calls = sum(
        int(t.get("tool_calls", 0))
        for r in scored
        for t in (r.get("timings") or {}).get("turns") or []
        if isinstance(t, dict)
    )
    finished = len(kept) + len(failed) + len(filtered)
    minutes = session.wall_s / 60.0
    return {
        "counts": {
            "expected": expected,
            "finished": finished,
            "remaining": max(0, expected - finished),
            "kept": len(kept),
            "failed": len(failed),
            "filtered": len(filtered),
            "failed_by_reason": dict(sorted(failures.items())),
            "filtered_by_reason": dict(sorted(filter_reasons.items())),
            "stop_reasons": dict(sorted(stop_reasons.items())),
        },
        "complete": finished >= expected,
        "reward": _reward_stats(rewards),
        "tokens": {
            "generated": sum(generated_tokens(r) for r in scored),
            "prompt": sum(int(r.get("prompt_tokens") or 0) for r in scored),
            "turns": sum(int(r.get("turns") or 0) for r in scored),
        },
        "tool_errors": {
            "total": sum(tool_errors.values()),
            "tool_calls": tool_calls,
            "by_kind": dict(sorted(tool_errors.items())),
            "rate_per_call": (sum(tool_errors.values()) / tool_calls) if tool_calls else None,
            "rate_per_rollout": (
                {k: v / len(scored) for k, v in sorted(tool_errors.items())} if scored else {}
            ),
        },
        "session": {
            "wall_s": session.wall_s,
            "rollouts": session.rollouts,
            "generated_tokens": session.generated_tokens,
            "rollouts_per_min": session.rollouts / minutes if minutes > 0 else None,
            "tokens_per_s": (
                session.generated_tokens / session.wall_s if session.wall_s > 0 else None
            ),
            "interrupted": session.interrupted,
            "cancelled_in_flight": session.cancelled_in_flight,
        },
    }
