"""``summary.json``: counts, reward and pass-rate statistics, tokens, tool errors, throughput."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import JSONObject

PASS_THRESHOLD = 1.0


@attrs.frozen(slots=True)
class SessionStats:
    """What this process did: wall time (model loading included), rollouts it finished,
    tokens it generated, and ``active_s``, the time spent running rollouts."""

    wall_s: float
    rollouts: int
    generated_tokens: int
    interrupted: bool = False
    cancelled_in_flight: int = 0
    active_s: float | None = None  # time spent running rollouts (throughput is over this)


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


class SummaryBuilder:
    """Accumulates records one at a time (a run's logs are streamed, never held in memory)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._rewards: list[float] = []
        self._failures: Counter[str] = Counter()
        self._filter_reasons: Counter[str] = Counter()
        self._stop_reasons: Counter[str] = Counter()
        self._tool_errors: Counter[str] = Counter()
        self._tool_calls = 0
        self._tokens: Counter[str] = Counter()

    def add(self, status: str, record: Mapping[str, Any]) -> None:
        """Count one record of ``status`` (``kept``, ``failed`` or ``filtered``)."""
        self._counts[status] += 1
        if status == "failed":
            failure = record.get("failure")
            if isinstance(failure, dict):
                self._failures[f"{failure.get('kind')}:{failure.get('phase')}"] += 1
            return
        if status == "filtered":
            self._filter_reasons[str(record.get("filter_reason"))] += 1
        reward = record.get("reward")
        if isinstance(reward, int | float):
            self._rewards.append(float(reward))
        self._stop_reasons[str(record.get("stop_reason"))] += 1
        for error in record.get("tool_errors") or []:
            if isinstance(error, dict):
                self._tool_errors[str(error.get("kind"))] += 1
        for turn in (record.get("timings") or {}).get("turns") or []:
            if isinstance(turn, dict):
                self._tool_calls += int(turn.get("tool_calls", 0))
        self._tokens["generated"] += generated_tokens(record)
        self._tokens["prompt"] += int(record.get("prompt_tokens") or 0)
        self._tokens["turns"] += int(record.get("turns") or 0)

    def result(self, *, expected: int, session: SessionStats) -> JSONObject:
        counts = self._counts
        finished = counts["kept"] + counts["failed"] + counts["filtered"]
        scored = counts["kept"] + counts["filtered"]
        errors = sum(self._tool_errors.values())
        active = session.active_s if session.active_s is not None else session.wall_s
        return {
            "counts": {
                "expected": expected,
                "finished": finished,
                "remaining": max(0, expected - finished),
                "kept": counts["kept"],
                "failed": counts["failed"],
                "filtered": counts["filtered"],
                "failed_by_reason": dict(sorted(self._failures.items())),
                "filtered_by_reason": dict(sorted(self._filter_reasons.items())),
                "stop_reasons": dict(sorted(self._stop_reasons.items())),
            },
            "complete": finished >= expected,
            "reward": _reward_stats(self._rewards),
            "tokens": {k: self._tokens[k] for k in ("generated", "prompt", "turns")},
            "tool_errors": {
                "total": errors,
                "tool_calls": self._tool_calls,
                "by_kind": dict(sorted(self._tool_errors.items())),
                "rate_per_call": errors / self._tool_calls if self._tool_calls else None,
                "rate_per_rollout": (
                    {k: v / scored for k, v in sorted(self._tool_errors.items())} if scored else {}
                ),
            },
            "session": {
                "wall_s": session.wall_s,
                "active_s": active,
                "rollouts": session.rollouts,
                "generated_tokens": session.generated_tokens,
                "rollouts_per_min": session.rollouts / (active / 60.0) if active > 0 else None,
                "tokens_per_s": session.generated_tokens / active if active > 0 else None,
                "interrupted": session.interrupted,
                "cancelled_in_flight": session.cancelled_in_flight,
            },
        }


def build_summary(
    *,
    expected: int,
    kept: Iterable[Mapping[str, Any]],
    failed: Iterable[Mapping[str, Any]],
    filtered: Iterable[Mapping[str, Any]],
    session: SessionStats,
) -> JSONObject:
    """The summary of a run directory's three logs plus this session's throughput."""
    builder = SummaryBuilder()
    for status, records in (("kept", kept), ("failed", failed), ("filtered", filtered)):
        for record in records:
            builder.add(status, record)
    return builder.result(expected=expected, session=session)
