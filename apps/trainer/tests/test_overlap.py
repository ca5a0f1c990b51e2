"""``--overlap``: the live source samples step N+1 while step N's update runs, with the weights
from before that update (policy lag 1), and the step it feeds trains on exactly those rollouts.
Real embedded model, bwrap sandboxes and JAX learner."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hermes_trainer.config import MEASURED_RECIPE, TrainConfig
from hermes_trainer.loop import train


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.e2e
def test_each_step_after_the_first_samples_during_the_update_before_it(tmp_path: Path) -> None:
    config = TrainConfig(
        output=tmp_path / "run",
        steps=3,
        groups_per_step=1,
        group_size=2,
        objective="sft",
        min_reward=0.0,  # every rollout trains: every step updates, so every step overlaps
        threads=1,
        overlap=True,
        temperature=MEASURED_RECIPE["temperature"],
        context_tokens=int(MEASURED_RECIPE["context_tokens"]),
        max_turns=1,
        max_tokens=24,
    )
    history = anyio.run(lambda: train(config))
    assert [m.step for m in history] == [1, 2, 3]
    assert [m.policy_lag for m in history] == [0.0, 1.0, 1.0]
    assert all(m.weights is not None for m in history)
    assert all(m.log_ratio_mean is not None and m.log_ratio_mean < 0.5 for m in history)
    records = [
        json.loads(line)
        for line in (config.output / "rollouts" / "trajectories.jsonl").read_text().splitlines()
    ]
    assert sorted(r["step"] for r in records if r["phase"] == "train") == [1, 1, 2, 2, 3, 3]
    lines = (config.output / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["policy_lag"] for line in lines] == [0.0, 1.0, 1.0]
