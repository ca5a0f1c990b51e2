"""A training run killed with ``kill -9`` and continued with ``--resume`` follows the curve
the same run makes uninterrupted: each step's rollouts, rewards and trained tokens are the
same, the losses, the held-out evaluations (``--eval-every``) and the final adapter match
(and ``--log-to tensorboard``'s events hold the same curve as ``metrics.jsonl``, the killed
steps past the checkpoint purged; ``rollouts/`` holds each step's and each evaluation's
rollouts exactly once, their rewards those of ``metrics.jsonl`` and ``eval.jsonl``), and
nothing of the killed process stays behind once the resumed run ends. The killed run compiles
nothing: every program comes from the first run's ``--jax-cache``."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from hermes_protocols.formats import RunDirectory, TrainingTag, training_rollouts

from tests.metrics_logs import tensorboard_scalars
from tests.user_command import UserCommand, traversable_tmp

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

STEPS = 3
#: --groups-per-step times --group-size, and --eval-items times --group-size
PER_STEP = PER_EVALUATION = 2
#: SFT on every rollout: each step updates, so each checkpoint holds new weights
TINY = ["--steps", str(STEPS), "--groups-per-step", "1", "--group-size", "2",
        "--max-turns", "1", "--max-tokens", "24", "--objective", "sft", "--min-reward", "0",
        "--threads", "1", "--no-progress", "--log-to", "tensorboard",
        "--eval-items", "1", "--eval-every", "2"]  # fmt: skip


@pytest.fixture
def sandbox_tmp() -> Iterator[Path]:
    yield from traversable_tmp()


def _run(tmp_path: Path, sandbox_tmp: Path, name: str, args: list[str]) -> UserCommand:
    cwd = tmp_path / name
    cwd.mkdir()
    cache = ["--jax-cache", str(tmp_path / "jax-cache")]
    return UserCommand("apps/trainer", [*args, *TINY, *cache], cwd=cwd, tmp=sandbox_tmp)


def _steps(output: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def _evaluations(output: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (output / "eval.jsonl").read_text().splitlines()]


def _check_rollouts(output: Path) -> None:
    """``rollouts/`` holds ``PER_STEP`` records of each step of ``metrics.jsonl`` and
    ``PER_EVALUATION`` of each evaluation of ``eval.jsonl`` (each once), their mean rewards
    those files' ``mean_reward``."""
    run = RunDirectory(training_rollouts(output))
    assert run.tokenizer.is_file()
    records = {
        path: [json.loads(line) for line in path.read_text().splitlines()]
        for path in (run.trajectories, run.failed)
        if path.is_file()
    }
    everything = [r for rs in records.values() for r in rs]
    assert len({r["id"] for r in everything}) == len(everything)
    tags = [TrainingTag.of(r) for r in everything]
    expected = [TrainingTag.train(s["step"]) for s in _steps(output) for _ in range(PER_STEP)]
    expected += [
        TrainingTag.evaluation(e["label"], e["after_step"])
        for e in _evaluations(output)
        for _ in range(PER_EVALUATION)
    ]
    assert sorted(map(repr, tags)) == sorted(map(repr, expected))
    kept = records[run.trajectories]
    for step in _steps(output):
        rewards = [
            r["reward"] for r in kept if TrainingTag.of(r) == TrainingTag.train(step["step"])
        ]
        assert sum(rewards) / len(rewards) == pytest.approx(step["mean_reward"]), step["step"]
    for evaluation in _evaluations(output):
        tag = TrainingTag.evaluation(evaluation["label"], evaluation["after_step"])
        rewards = [r["reward"] for r in kept if TrainingTag.of(r) == tag]
        assert sum(rewards) / len(rewards) == pytest.approx(evaluation["mean_reward"])


def _leave_what_a_later_kill_leaves(output: Path, step: int) -> None:
    """Append the rollouts of ``step`` (past the checkpoint) and half a line, as a kill after
    that step's sampling and one in the middle of a write leave them (the kill above lands
    while step ``done + 1`` samples, before its rollouts are written)."""
    log = RunDirectory(training_rollouts(output)).trajectories
    first = [json.loads(line) for line in log.read_text().splitlines()]
    later = [
        {**r, "id": f"step-{step}/{r['id']}", "step": step} for r in first if r["phase"] == "train"
    ][:PER_STEP]
    with log.open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in later)
        handle.write('{"id": "torn')


def _adapter(path: Path) -> dict[str, np.ndarray]:
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors}


@pytest.mark.timeout(1500)
def test_a_killed_run_resumes_on_the_same_curve(tmp_path: Path, sandbox_tmp: Path) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    command = _run(tmp_path, sandbox_tmp, "uninterrupted", ["--output", str(whole)])
    assert command.wait(timeout=600) == 0, command.output[-4000:]
    compiled = {path.name for path in (tmp_path / "jax-cache").iterdir()}
    assert compiled, "--jax-cache kept no compiled program"

    command = _run(tmp_path, sandbox_tmp, "first", ["--output", str(killed)])
    checkpoint = killed / "checkpoint.npz"
    command.wait_for(checkpoint.exists, timeout=600, what="wrote a checkpoint")
    command.signal_group(signal.SIGKILL)
    command.wait(timeout=60)
    # the same steps, the same shapes: the killed run loaded each program the first compiled
    assert {path.name for path in (tmp_path / "jax-cache").iterdir()} == compiled
    done = len(_steps(killed))
    assert 1 <= done < STEPS, f"killed after {done} steps: nothing left to resume"
    _leave_what_a_later_kill_leaves(killed, done + 1)

    command = _run(tmp_path, sandbox_tmp, "resumed", ["--output", str(killed), "--resume"])
    assert command.wait(timeout=600) == 0, command.output[-4000:]
    assert "Traceback" not in command.output
    assert command.leftovers() == []

    expected, resumed = _steps(whole), _steps(killed)
    for output in (whole, killed):  # TensorBoard's curve is metrics.jsonl's, resumed or not
        rewards = tensorboard_scalars(output / "tensorboard")["train/mean_reward"]
        assert rewards == pytest.approx({s["step"]: s["mean_reward"] for s in _steps(output)})
    assert [s["step"] for s in resumed] == list(range(1, STEPS + 1))
    for mine, theirs in zip(resumed, expected, strict=True):
        for key in ("rollouts", "mean_reward", "trained_groups", "trainable_tokens"):
            assert mine[key] == theirs[key], (mine["step"], key)
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4), mine["step"]
    for output in (whole, killed):
        _check_rollouts(output)
    evaluations = _evaluations(whole)  # before, every 2 steps, after
    assert [(e["label"], e["after_step"]) for e in evaluations] == [
        ("base", 0),
        ("step 2", 2),
        ("trained", 3),
    ]
    assert _evaluations(killed) == evaluations
    mine_adapter, their_adapter = (
        _adapter(killed / "adapter.gguf"),
        _adapter(whole / "adapter.gguf"),
    )
    assert mine_adapter.keys() == their_adapter.keys()
    for name, values in mine_adapter.items():
        np.testing.assert_allclose(values, their_adapter[name], atol=1e-5, err_msg=name)
