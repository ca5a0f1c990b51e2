"""The overview section: counts, reward, pass rates, stop reasons, turns, tokens, tools,
parse errors, drift and throughput, accumulated one record at a time; for a training run's
records (:class:`~hermes_protocols.formats.TrainingTag`), the mean reward by step."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from html import escape
from typing import Any

from hermes_protocols.formats import TRAIN_PHASE, TrainingTag

from hermes_report import charts
from hermes_report.model import failures_recorded, tool_stats

PASS_THRESHOLD = 1.0
# tool-call errors the parser or the schema check raised (the model emitted a bad call);
# the others are the tool failing at run time
PARSE_ERROR_KINDS = frozenset({"invalid_arguments", "unknown_tool", "schema_violation"})
DRIFT_MEANING = (
    "Drift counts the tokens where re-rendering and re-tokenizing a rollout's final messages "
    "gives other ids than the model sampled; the trainer gets the sampled ids, so drift is "
    "no error in the training data but how far a pipeline that re-tokenizes would be off."
)


def _rate(passed: int, total: int) -> str:
    return f"{passed / total:.0%} ({passed}/{total})" if total else "—"


class Overview:
    """Accumulates the overview's statistics; :meth:`html` renders them."""

    def __init__(self) -> None:
        self.status: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.rewards: list[float] = []
        self.by_family: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.by_difficulty: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.stops: Counter[str] = Counter()
        self.turns: list[float] = []
        self.tokens: list[float] = []
        self.trainable: list[float] = []
        self.calls: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.failures_known = True
        self.error_kinds: Counter[str] = Counter()
        self.sources: Counter[str] = Counter()
        self.drift_checked = 0
        self.drift_rollouts = 0
        self.drift_mismatches = 0
        self.noncanonical = 0
        self.lossy = 0
        self.finished_at: list[float] = []
        #: a training run's rewards: per training step, and per evaluation ``(step, label)``
        self.step_rewards: defaultdict[int, list[float]] = defaultdict(list)
        self.eval_rewards: defaultdict[tuple[int, str], list[float]] = defaultdict(list)
        self.training_run = False

    def add(self, record: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        """Count one rollout (its record and its :func:`hermes_report.model.row`)."""
        status = row["st"]
        self.status[status] += 1
        if row["why"]:
            self.reasons[f"{status}: {row['why']}"] += 1
        finished = record.get("finished_at")
        if isinstance(finished, int | float) and math.isfinite(finished):
            self.finished_at.append(float(finished))
        if status == "failed":
            return
        reward = row["r"]
        tag = TrainingTag.of(record)
        self.training_run |= tag is not None
        if reward is not None and tag is not None:
            if tag.phase == TRAIN_PHASE:
                self.step_rewards[tag.step].append(reward)
            else:
                self.eval_rewards[(tag.step, str(tag.label))].append(reward)
        if reward is not None:
            self.rewards.append(reward)
            passed = int(reward >= PASS_THRESHOLD)
            for key, table in ((row["fam"], self.by_family), (row["dif"], self.by_difficulty)):
                if key is not None:
                    table[key][0] += passed
                    table[key][1] += 1
        self.stops[str(row["stop"])] += 1
        if row["turns"] is not None:
            self.turns.append(row["turns"])
        if row["ntok"] is not None:
            self.tokens.append(row["ntok"])
            self.trainable.append(row["gen"])
        self.sources[row["src"] or "none (messages only)"] += 1
        self.failures_known &= failures_recorded(record)
        for tool, (calls, failures) in tool_stats(record).items():
            self.calls[tool] += calls
            self.failures[tool] += failures
        for error in record.get("tool_errors") or []:
            if isinstance(error, Mapping):
                self.error_kinds[str(error.get("kind"))] += 1
        self._add_drift(record.get("drift"))

    def _add_drift(self, drift: object) -> None:
        if not isinstance(drift, Mapping):
            return
        self.drift_checked += 1
        mismatches = drift.get("mismatches")
        if isinstance(mismatches, int) and mismatches > 0:
            self.drift_rollouts += 1
            self.drift_mismatches += mismatches
        for attr, key in (("noncanonical", "noncanonical_tokens"), ("lossy", "lossy_tokens")):
            value = drift.get(key)
            if isinstance(value, int):
                setattr(self, attr, getattr(self, attr) + value)

    # ------------------------------------------------------------------ rendering
    def _counts_table(self) -> str:
        total = sum(self.status.values())
        passed = sum(r >= PASS_THRESHOLD for r in self.rewards)
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else None
        rows = [
            ("rollouts", str(total), "total"),
            ("kept", str(self.status["kept"]), "kept"),
            ("failed", str(self.status["failed"]), "failed"),
            ("filtered", str(self.status["filtered"]), "filtered"),
            ("mean reward", "—" if mean is None else f"{mean:.3f}", "mean"),
            (f"pass rate (reward ≥ {PASS_THRESHOLD:g})", _rate(passed, len(self.rewards)), "pass"),
            ("generated (trainable) tokens", str(int(sum(self.trainable))), "trainable"),
            ("tool calls by the model", str(sum(self.calls.values())), "tool_calls"),
            ("failed tool calls", self._failed(sum(self.failures.values()), "{}"), "tool_failures"),
        ]
        body = "".join(
            f'<tr><th>{escape(k)}</th><td data-count="{escape(key)}">{escape(v)}</td></tr>'
            for k, v, key in rows
        )
        return f'<table class="counts">{body}</table>'

    def _failed(self, count: int, form: str = "{} failed") -> str:
        """``count`` in ``form``, or that the records do not say which calls failed."""
        return form.format(count) if self.failures_known else "failures not recorded"

    def _drift_table(self) -> str:
        meaning = f'<p class="note" id="drift-meaning">{escape(DRIFT_MEANING)}</p>'
        if not self.drift_checked:
            return f'<p class="nodata">no drift check in these records</p>{meaning}'
        rows = [
            ("rollouts checked", self.drift_checked),
            ("rollouts with drift", self.drift_rollouts),
            ("drifted tokens", self.drift_mismatches),
            ("non-canonical tokens (not drift)", self.noncanonical),
            ("lossy tokens", self.lossy),
        ]
        body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
        return f'<table class="counts" data-table="drift">{body}</table>{meaning}'

    def _by_step(self) -> str:
        """Mean reward of each training step's rollouts, and of each held-out evaluation at
        the step it followed."""

        def mean(values: list[float]) -> tuple[float, str]:
            value = sum(values) / len(values)
            return value, f"{value:.3f} ({len(values)} rollouts)"

        train = [(step, *mean(v)) for step, v in sorted(self.step_rewards.items())]
        held_out = [(step, *mean(v)) for (step, _), v in sorted(self.eval_rewards.items())]
        return charts.by_step(
            "reward_by_step",
            "Mean reward by step (training rollouts; held-out evaluations)",
            [("training", train), ("held-out", held_out)],
        )

    def html(self) -> str:
        """The overview section's inner HTML."""

        def counted(counter: Counter[str]) -> list[tuple[str, float, str]]:
            return [(k, float(v), str(v)) for k, v in counter.most_common(12)]

        def rates(table: Mapping[str, list[int]]) -> list[tuple[str, float, str]]:
            return [(k, p / n, _rate(p, n)) for k, (p, n) in sorted(table.items()) if n]

        tools = sorted(set(self.calls) | set(self.failures))
        tool_items = [
            (t, float(self.calls[t]), f"{self.calls[t]} calls, " + self._failed(self.failures[t]))
            for t in tools
        ]
        parse = Counter({k: v for k, v in self.error_kinds.items() if k in PARSE_ERROR_KINDS})
        start = min(self.finished_at, default=0.0)
        points = [(t - start, float(n + 1)) for n, t in enumerate(sorted(self.finished_at))]
        figures = [
            charts.bars("status", "Rollouts by outcome and reason", counted(self.reasons))
            if self.reasons
            else charts.bars("status", "Rollouts by outcome", counted(self.status)),
            charts.histogram("reward", "Reward", self.rewards),
            charts.bars("family", "Pass rate by task family", rates(self.by_family), max_value=1),
            charts.bars(
                "difficulty", "Pass rate by difficulty", rates(self.by_difficulty), max_value=1
            ),
            charts.bars("stop", "Stop reasons", counted(self.stops)),
            charts.histogram("turns", "Turns per rollout", self.turns, integer=True),
            charts.histogram("tokens", "Tokens per rollout (whole sequence)", self.tokens),
            charts.histogram("trainable", "Trainable tokens per rollout", self.trainable),
            charts.bars("tools", "Tool calls by the model (and failures) per tool", tool_items),
            charts.bars("errors", "Tool-call errors by kind", counted(self.error_kinds)),
            charts.bars("parse", "Parse errors by kind", counted(parse)),
            charts.bars("source", "Token source", counted(self.sources)),
            charts.line(
                "throughput",
                "Throughput: rollouts finished over time",
                points,
                x_label="s",
                y_label="rollouts",
            ),
        ]
        if self.training_run:
            figures.insert(0, self._by_step())
        drift = (
            f'<figure class="chart" data-chart="drift"><figcaption>Drift</figcaption>'
            f"{self._drift_table()}</figure>"
        )
        return (
            f'<div class="summary">{self._counts_table()}</div>'
            f'<div class="charts">{"".join(figures)}{drift}</div>'
        )
