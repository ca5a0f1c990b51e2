"""Kill the batch runner with SIGKILL at random points, resume, and check exactly-once output.

The runner is a real process running the real CLI, writer and resume code; its rollouts come
from an in-process fake (random durations, ~100 KB records so a kill can land mid-write), so
the test spends its time on crashes and restarts rather than on inference.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO

import pytest
from hermes_rollouts import DUPLICATE_WINDOW_S

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ITEMS, GROUP = 40, 2
EXPECTED = {f"fake/item{i}/{g}" for i in range(ITEMS) for g in range(GROUP)}
LOGS = ("trajectories.jsonl", "failed.jsonl", "filtered.jsonl")

TARGET = textwrap.dedent(
    """
    import random
    import sys
    from contextlib import asynccontextmanager

    import anyio
    from hermes_protocols import (
        AgentResult, FailureKind, Item, Message, RolloutFailure, Score, ScoredRollout, StopReason,
    )

    from hermes_batch_runner.cli import main


    class Components:
        env_name = "fake"
        model = "fake-model"
        items = [Item(id=f"item{i}") for i in range(int(sys.argv[1]))]

        async def run_one(self, item, index, group_index):
            await anyio.sleep(random.uniform(0.02, 0.15))
            rid = f"fake/{item.id}/{group_index}"
            if index % 5 == 4:
                failure = RolloutFailure(FailureKind.INFRASTRUCTURE, "agent", "boom", 2)
                return ScoredRollout(rid, "fake", item, group_index, None, None, failure)
            result = AgentResult(
                messages=[Message.user("x" * 100_000), Message.assistant("done é")],
                stop_reason=StopReason.FINAL_ANSWER,
                turns=1,
            )
            score = Score(reward=float(index % 2))
            return ScoredRollout(rid, "fake", item, group_index, result, score)


    @asynccontextmanager
    async def wiring(config):
        yield Components()


    sys.exit(main(sys.argv[2:], wiring=wiring))
    """
)


def _lines(run: Path) -> int:
    total = 0
    for name in LOGS:
        path = run / name
        if path.exists():
            total += path.read_bytes().count(b"\n")
    return total


def _start(
    script: Path, run: Path, *extra: str, stderr: IO[bytes] | int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable, str(script), str(ITEMS), "--output", str(run), "--group-size",
        str(GROUP), "--concurrency", "4", "--no-progress", "--min-reward", "0.5", *extra,
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)


def _wait_for_text(path: Path, text: str) -> None:
    deadline = time.monotonic() + 60
    while text not in path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not written within 60 s: {path.read_text()}")
        time.sleep(0.02)


def _wait_for_progress(process: subprocess.Popen[bytes], run: Path, above: int) -> None:
    deadline = time.monotonic() + 60
    while _lines(run) <= above and process.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError("the runner made no progress within 60 s")
        time.sleep(0.02)


def test_sigkill_at_random_points_then_resume_gives_each_id_exactly_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(int(os.environ.get("KILL_SEED", "7")))
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    run = tmp_path / "run"
    kills = 0
    for round_index in range(5):
        before = _lines(run)
        process = _start(script, run, *(["--resume"] if round_index else []))
        try:
            _wait_for_progress(process, run, before)
            time.sleep(rng.uniform(0.0, 0.15))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            process.wait(timeout=60)
            assert process.stderr is not None
            process.stderr.close()
    assert kills >= 3
    assert _lines(run) < len(EXPECTED)
    final = _start(script, run, "--resume")
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()

    seen: list[str] = []
    for name in LOGS:
        raw = (run / name).read_bytes()
        assert raw == b"" or raw.endswith(b"\n"), f"{name} ends in a torn line"
        for line in raw.splitlines():
            record = json.loads(line)
            seen.append(record["id"])
    assert sorted(seen) == sorted(EXPECTED)
    assert len(seen) == len(set(seen))
    failed = [json.loads(x)["id"] for x in (run / "failed.jsonl").read_text().splitlines()]
    failing = [i for i in range(ITEMS) if i % 5 == 4]
    assert sorted(failed) == sorted(f"fake/item{i}/{g}" for i in failing for g in range(GROUP))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["counts"]["finished"] == len(EXPECTED)
    below = [i for i in range(ITEMS) if i % 5 != 4 and i % 2 == 0]
    assert summary["counts"]["filtered_by_reason"] == {"min_reward": len(below) * GROUP}


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_stops_cleanly_writes_the_summary_and_says_how_to_resume(
    tmp_path: Path, presses: int
) -> None:
    # Two presses: every item's rollouts but the first's last a minute, so some are in flight
    # at the second press however late it lands; it is sent once the first one's notice is
    # out and the duplicate window has passed.
    durations = "random.uniform(0.3, 0.6)" if presses == 1 else "(0.3 if index == 0 else 60.0)"
    script = tmp_path / "target.py"
    script.write_text(TARGET.replace("random.uniform(0.02, 0.15)", durations))
    run, stderr = tmp_path / "run", tmp_path / "stderr.txt"
    with stderr.open("wb") as sink:
        process = _start(script, run, stderr=sink)
    _wait_for_progress(process, run, 0)
    process.send_signal(signal.SIGINT)
    if presses == 2:
        _wait_for_text(stderr, "stopping: finishing in-flight rollouts")
        time.sleep(DUPLICATE_WINDOW_S + 0.2)
        process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    message = stderr.read_text()
    assert process.returncode == 130, message
    assert f"resume with: uv run apps/batch_runner --output {run} --resume" in message
    if presses == 2:
        assert "cancelling in-flight rollouts" in message
    summary = json.loads((run / "summary.json").read_text())
    assert summary["session"]["interrupted"] is True
    assert summary["complete"] is False
    assert summary["counts"]["finished"] == _lines(run)
    assert (summary["session"]["cancelled_in_flight"] > 0) is (presses == 2)
    script.write_text(TARGET)  # the resume at full speed
    final = _start(script, run, "--resume")
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert _lines(run) == len(EXPECTED)
