"""Rollout metrics between two log points: reward, pass rate, turns, tool errors by kind, stop
reasons, drift, exclusions (failed / overlong) and groups sent or dropped (incomplete, or all
scores equal), plus sent groups whose scores were all equal (no GRPO advantage signal)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable

import attrs
from hermes_protocols import ScoredRollout

from hermes_atropos_env.groups import GroupOutcome


@attrs.define
class RolloutMetrics:
    """Accumulates group outcomes; :meth:`snapshot` returns ``train/...`` metrics and resets.

    ``pass_threshold``: a rollout passes when its reward reaches it.
    """

    pass_threshold: float = 1.0
    prefix: str = "train"
    _rewards: list[float] = attrs.field(factory=list)
    _turns: list[int] = attrs.field(factory=list)
    _drift_mismatches: list[int] = attrs.field(factory=list)
    _noncanonical: list[int] = attrs.field(factory=list)
    _drifted: int = 0
    _tool_errors: Counter[str] = attrs.field(factory=Counter)
    _stop_reasons: Counter[str] = attrs.field(factory=Counter)
    _excluded: Counter[str] = attrs.field(factory=Counter)
    _truncated: int = 0
    _groups_sent: int = 0
    _groups_dropped: int = 0
    _equal_sent: int = 0
    _equal_dropped: int = 0
    _rollouts: int = 0

    def add(self, outcome: GroupOutcome, *, equal_scores_dropped: bool = False) -> None:
        """Record one group: every rollout that ran, and whether the group was complete, sent,
        or dropped because all its scores were equal (``equal_scores_dropped``)."""
        ran = list(outcome.usable) + [r for r, _ in outcome.excluded]
        self._record(ran)
        self._excluded.update(outcome.exclusion_counts)
        self._truncated += outcome.truncated
        if equal_scores_dropped:
            self._equal_dropped += 1
        elif outcome.group is None:
            self._groups_dropped += 1
        else:
            self._groups_sent += 1
            self._equal_sent += len(set(outcome.group["scores"])) == 1

    def _record(self, rollouts: Iterable[ScoredRollout]) -> None:
        for rollout in rollouts:
            self._rollouts += 1
            if rollout.score is not None:
                self._rewards.append(rollout.score.reward)
            result = rollout.result
            if result is None:
                continue
            self._turns.append(result.turns)
            self._stop_reasons[str(result.stop_reason)] += 1
            self._tool_errors.update(str(error.kind) for error in result.tool_errors)
            if result.drift is not None:
                self._drift_mismatches.append(result.drift.mismatches)
                self._noncanonical.append(result.drift.noncanonical_tokens)
                self._drifted += int(result.drift.drifted)

    def snapshot(self) -> dict[str, float]:
        """The metrics since the last snapshot (empty lists give no entry), then reset."""
        p = self.prefix
        out: dict[str, float] = {
            f"{p}/rollouts": float(self._rollouts),
            f"{p}/groups_sent": float(self._groups_sent),
            f"{p}/groups_dropped_incomplete": float(self._groups_dropped),
            f"{p}/groups_dropped_equal_scores": float(self._equal_dropped),
            f"{p}/groups_sent_equal_scores": float(self._equal_sent),
            f"{p}/overlong_truncated": float(self._truncated),
        }
        if self._rewards:
            out[f"{p}/reward_mean"] = statistics.fmean(self._rewards)
            passed = sum(r >= self.pass_threshold for r in self._rewards)
            out[f"{p}/pass_rate"] = passed / len(self._rewards)
        if self._turns:
            out[f"{p}/turns_mean"] = statistics.fmean(self._turns)
            out[f"{p}/turns_max"] = float(max(self._turns))
        if self._drift_mismatches:
            out[f"{p}/drift_mismatches_mean"] = statistics.fmean(self._drift_mismatches)
            out[f"{p}/drift_rate"] = self._drifted / len(self._drift_mismatches)
            out[f"{p}/noncanonical_tokens_mean"] = statistics.fmean(self._noncanonical)
        for kind, count in self._tool_errors.items():
            out[f"{p}/tool_errors/{kind}"] = float(count)
        for reason, count in self._stop_reasons.items():
            out[f"{p}/stop_reason/{reason}"] = float(count)
        for reason, count in self._excluded.items():
            out[f"{p}/excluded/{reason}"] = float(count)
        self.reset()
        return out

    def reset(self) -> None:
        fresh = RolloutMetrics(pass_threshold=self.pass_threshold, prefix=self.prefix)
        for field in attrs.fields(RolloutMetrics):
            setattr(self, field.name, getattr(fresh, field.name))
