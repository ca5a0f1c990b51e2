"""``metrics.jsonl`` is strict JSON: a loss that is not a number is written as ``null``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hermes_trainer.metrics import Evaluation, StepMetrics, append_jsonl, plot, read_jsonl

pytestmark = pytest.mark.slow  # the trainer's dependencies (matplotlib)


def _refuse(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")


def _step(step: int, **changes: Any) -> StepMetrics:
    """A step's metrics with ordinary values, ``changes`` applied."""
    values: dict[str, Any] = {
        "step": step,
        "rollouts": 2,
        "mean_reward": 0.5,
        "pass_rate": 0.5,
        "trained_groups": 1,
        "dropped_groups": 0,
        "failed_rollouts": 0,
        "loss": 0.1,
        "log_ratio_mean": 0.01,
        "log_ratio_max": 0.1,
        "trainable_tokens": 3,
        "train_tokens_per_s": None,
        "sample_tokens_per_s": None,
        "sample_s": 1.0,
        "update_s": 2.0,
    }
    return StepMetrics(**{**values, **changes})


def test_nan_and_infinity_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    step = _step(1, loss=float("nan"), log_ratio_max=float("inf"))
    append_jsonl(path, step)
    record = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse)
    assert (record["loss"], record["log_ratio_max"], record["log_ratio_mean"]) == (None, None, 0.01)
    assert read_jsonl(path) == [
        StepMetrics(**{**record, "loss": None, "log_ratio_max": None})  # the rest unchanged
    ]


def test_the_plot_draws_the_held_out_evaluations(tmp_path: Path) -> None:
    steps = [_step(1), _step(2)]
    held_out = [
        Evaluation(label=label, after_step=step, rollouts=2, failed_rollouts=0, mean_reward=reward)
        for label, step, reward in (("base", 0, 0.0), ("trained", 2, 1.0))
    ]
    without = plot(tmp_path / "without.png", steps, "t").read_bytes()
    drawn = plot(tmp_path / "with.png", steps, "t", held_out).read_bytes()
    assert drawn != without
    assert drawn == plot(tmp_path / "again.png", steps, "t", held_out).read_bytes()
