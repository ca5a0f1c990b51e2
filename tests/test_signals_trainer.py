"""The trainer's signal policy as a user meets it: ``uv run apps/trainer`` (live sampling of
endless_terminals with the embedded model on bwrap) in its own process group, signalled with
``kill -SIG -- -PGID`` after its first step: the step in flight finishes and is written (uv's
forwarded duplicate does not cancel it), then ``128 + signal``, no traceback, no bwrap host
left behind, and a line saying how to resume. The run evaluates the base weights
on a held-out task first (its progress printed), and a drained run skips the final evaluation."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.user_command import UserCommand, traversable_tmp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TINY = ["--steps", "20", "--groups-per-step", "1", "--group-size", "2", "--max-turns", "1",
        "--max-tokens", "24", "--eval-items", "1", "--no-progress"]  # fmt: skip


@pytest.fixture
def sandbox_tmp() -> Iterator[Path]:
    yield from traversable_tmp()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_one_group_signal_finishes_the_step_and_stops(
    tmp_path: Path, sandbox_tmp: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "train"
    command = UserCommand(
        "apps/trainer", ["--output", str(out), *TINY], cwd=tmp_path, tmp=sandbox_tmp
    )
    command.wait_for(lambda: "step 1:" in command.stderr, timeout=300, what="finished a step")
    command.signal_group(signum)
    command.wait(timeout=180)
    output = command.output
    assert "Traceback" not in output, output[-4000:]
    assert command.leftovers() == []
    assert "stopping: finishing the current step" in output, output[-4000:]
    assert "cancelling the current step" not in output
    assert command.process.returncode == 128 + signum, output[-4000:]
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert 1 <= len(steps) < 20
    assert f"stopped by {signum.name} after {len(steps)} of 20 steps" in output
    assert f"the same command with --resume --output {out}" in output
    assert "held-out tasks (base weights): 1/1" in output, output[-4000:]
    evaluations = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [e["label"] for e in evaluations] == ["base"]
