"""``--steps 0 --eval-items N``: the trainer only evaluates the weights a run starts from (the
base model, or ``--init-adapter``'s), the way docs/training.md's transfer table was measured.
Through the real command line, with the embedded model and bwrap sandboxes; a ``--jax-cache``
that cannot be created is a one-line note, not a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hermes_trainer.config import recipe_options

TRAINER = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.e2e
def test_steps_0_evaluates_the_starting_weights_and_trains_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (tmp_path / "a-file").write_text("")
    unusable = tmp_path / "a-file" / "jax"
    command = [
        sys.executable,
        str(TRAINER),
        *recipe_options().split(),
        "--threads",
        "1",
        "--steps",
        "0",
        "--eval-items",
        "2",
        "--group-size",
        "2",
        "--max-turns",
        "1",
        "--max-tokens",
        "24",
        "--no-progress",
        "--output",
        str(out),
        "--jax-cache",
        str(unusable),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    said = "".join(done.stderr.split())  # the console wraps long paths
    assert f"evaluation:{out / 'eval.jsonl'}" in said, done.stderr
    assert f"note:--jax-cache{unusable}:Notadirectory;compilingwithoutacache" in said
    (evaluation,) = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert (evaluation["label"], evaluation["after_step"]) == ("base", 0)
    assert evaluation["rollouts"] + evaluation["failed_rollouts"] == 4
    assert not (out / "metrics.jsonl").exists()
    assert not (out / "adapter.gguf").exists()
    records = [
        json.loads(line)
        for line in (out / "rollouts" / "trajectories.jsonl").read_text().splitlines()
    ]
    assert [(r["phase"], r["eval_label"]) for r in records] == [("eval", "base")] * 4
    rewards = [r["reward"] for r in records if r["failure"] is None]
    assert sum(rewards) / len(rewards) == pytest.approx(evaluation["mean_reward"])
