"""Per-step metrics: one JSON line per step, and a PNG of reward (and |log ratio|) by step;
held-out evaluations: one JSON line each."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from hermes_protocols import ConfigError


@attrs.frozen(kw_only=True)
class StepMetrics:
    """What one step measured (see docs/training.md for each field)."""

    step: int
    rollouts: int
    mean_reward: float
    pass_rate: float
    trained_groups: int
    dropped_groups: int
    failed_rollouts: int
    loss: float | None
    log_ratio_mean: float | None
    log_ratio_max: float | None
    trainable_tokens: int
    train_tokens_per_s: float | None
    sample_tokens_per_s: float | None
    sample_s: float
    update_s: float
    policy_lag: float | None = None
    weights: str | None = None
    learning_rate: float | None = None
    clip_fraction: float | None = None
    kl: float | None = None


@attrs.frozen(kw_only=True)
class Evaluation:
    """The weights after ``after_step`` steps on the held-out tasks (``label``: base/trained)."""

    label: str
    after_step: int
    rollouts: int
    failed_rollouts: int
    mean_reward: float


def _finite(value: object) -> object:
    """A float that is not a number (a diverged loss) as ``None``: JSON has no NaN."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def append_jsonl(path: Path, metrics: StepMetrics | Evaluation) -> None:
    """Append one strict JSON line (NaN and infinity written as ``null``), flushed, so a killed
    run keeps every finished step."""
    record = {key: _finite(value) for key, value in attrs.asdict(metrics).items()}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, allow_nan=False) + "\n")
        handle.flush()


def _lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path`` (none when it does not exist); the last line, when a kill
    cut it short, is left out (:class:`ConfigError` for any other line that is not JSON)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number < len(lines):
                raise ConfigError(f"{path}: line {number} is not JSON ({exc})") from exc
    return records


def read_jsonl(path: Path) -> list[StepMetrics]:
    """The steps of a ``metrics.jsonl``."""
    return [StepMetrics(**record) for record in _lines(path)]


def read_evaluations(path: Path) -> list[Evaluation]:
    """The evaluations of an ``eval.jsonl``."""
    return [Evaluation(**record) for record in _lines(path)]


def rewrite_jsonl(path: Path, records: Sequence[StepMetrics | Evaluation]) -> None:
    """Replace ``path`` with ``records``, one line each (atomically)."""
    staging = path.with_name(f".{path.name}.partial")
    staging.unlink(missing_ok=True)
    for record in records:
        append_jsonl(staging, record)
    staging.touch()
    os.replace(staging, path)


def plot(
    path: Path, steps: Sequence[StepMetrics], title: str, held_out: Sequence[Evaluation] = ()
) -> Path:
    """Mean reward by step (with a 5-step moving average and the ``held_out`` evaluations at
    the step they followed) above the |log ratio| by step."""
    import matplotlib  # a second to load: not before the options are checked

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [m.step for m in steps]
    rewards = [m.mean_reward for m in steps]
    window = 5
    smooth = [
        sum(rewards[max(0, i - window + 1) : i + 1]) / len(rewards[max(0, i - window + 1) : i + 1])
        for i in range(len(rewards))
    ]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(xs, rewards, "o-", alpha=0.5, label="mean reward")
    top.plot(xs, smooth, "-", linewidth=2, label=f"{window}-step moving average")
    if held_out:
        top.plot(
            [e.after_step for e in held_out],
            [e.mean_reward for e in held_out],
            "s--",
            color="black",
            label="held-out tasks",
        )
    top.set_ylabel("reward")
    top.set_ylim(-0.02, 1.02)
    top.set_title(title)
    top.legend(loc="upper left")
    ratio_steps = [m for m in steps if m.log_ratio_mean is not None]
    bottom.plot(
        [m.step for m in ratio_steps],
        [m.log_ratio_mean for m in ratio_steps],
        "o-",
        label="mean |log ratio|",
    )
    bottom.plot(
        [m.step for m in ratio_steps],
        [m.log_ratio_max for m in ratio_steps],
        "x--",
        label="max |log ratio|",
    )
    bottom.set_yscale("log")
    bottom.set_xlabel("step")
    bottom.set_ylabel("trainer vs sampler")
    bottom.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
