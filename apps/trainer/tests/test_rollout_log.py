"""The live source's rollout log: real rollouts through the batch runner's record writer into
``OUTPUT/rollouts``, read back by the trainer's own trajectory reader and by ``hermes-report``
(its reward-by-step chart checked against means computed here from the JSONL)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from hermes_protocols import (
    AgentResult,
    Item,
    Message,
    ScoredRollout,
    StopReason,
)
from hermes_protocols.examples import failed_rollout, scored_rollout
from hermes_protocols.formats import TrainingTag
from hermes_protocols.tokens import TokenTrace
from hermes_report.cli import main as report_main
from hermes_trainer.grpo import build_batch
from hermes_trainer.rollout_log import RolloutLog
from hermes_trainer.samples import from_rollout, from_trajectory

MODEL = "embedded:SmolLM2"
TEMPERATURE = 0.6


def _rollout(item: str, index: int, reward: float | None) -> ScoredRollout:
    """Group member ``index`` of ``item``: scored ``reward``, or failed when ``None``."""
    if reward is None:
        return failed_rollout(Item(id=item), index, env="e")
    trace = (
        TokenTrace(logprob_mode="sampled")
        .append_context([1, 2, 3])
        .append_generated([40 + index, 41], [-0.5 - index, -0.25])
        .append_context([9])
    )
    result = AgentResult(
        messages=[Message.user(f"Write {item}."), Message.assistant("done")],
        stop_reason=StopReason.FINAL_ANSWER,
        turns=1,
        trace=trace,
        metadata={"sampling": {"temperature": TEMPERATURE, "missing_logprobs": []}},
    )
    return scored_rollout(Item(id=item), index, result, reward, env="e")


#: two steps on the same items (ids must still be unique), a failed rollout in step 1
STEPS = {
    1: [
        _rollout("a", 0, 1.0),
        _rollout("a", 1, 0.0),
        _rollout("b", 0, 0.5),
        _rollout("b", 1, None),
    ],
    2: [
        _rollout("a", 0, 1.0),
        _rollout("a", 1, 1.0),
        _rollout("b", 0, 0.25),
        _rollout("b", 1, 0.0),
    ],
}
EVALUATIONS = {("base", 0): [_rollout("t", 0, 0.0), _rollout("t", 1, 1.0)],
               ("trained", 2): [_rollout("t", 0, 1.0), _rollout("t", 1, 1.0)]}  # fmt: skip


def _write(output: Path, tokenizer: Path | None = None) -> RolloutLog:
    log = RolloutLog(output / "rollouts")
    log.start(tokenizer)
    for (label, after), rollouts in EVALUATIONS.items():
        if after == 0:
            log.append(rollouts, TrainingTag.evaluation(label, after), model=MODEL)
    for step, rollouts in STEPS.items():
        log.append(rollouts, TrainingTag.train(step), model=MODEL)
    log.append(EVALUATIONS[("trained", 2)], TrainingTag.evaluation("trained", 2), model=MODEL)
    return log


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_rollout_is_one_record_the_trainer_reads_back_as_it_trained(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text('{"model": {}}')
    log = _write(tmp_path, tokenizer)
    kept, failed = _lines(log.paths.trajectories), _lines(log.paths.failed)
    assert log.paths.tokenizer.read_text() == tokenizer.read_text()
    assert [r["id"] for r in failed] == ["step-1/e/b/1"]
    assert failed[0]["failure"]["phase"] == "setup"
    ids = [r["id"] for r in kept + failed]
    assert len(set(ids)) == len(ids) == 12
    for step, rollouts in STEPS.items():
        records = [r for r in kept if r.get("phase") == "train" and r["step"] == step]
        assert len(records) + sum(r["step"] == step for r in failed) == len(rollouts)
        # what the trainer trained on: the samples of this step's rollouts
        samples = [from_rollout(r, TEMPERATURE) for r in rollouts]
        trained = {s.id: s for s in samples if s.reward is not None}
        batch = build_batch([samples], objective="grpo", min_reward=0.0)
        rewards = [r["reward"] for r in records]
        assert sum(rewards) / len(rewards) == sum(batch.rewards) / len(batch.rewards)
        for record in records:
            read = from_trajectory(record)  # the trainer's reader of batch-runner records
            original = trained[record["id"].removeprefix(f"step-{step}/")]
            assert (read.ids, read.mask, read.logprobs, read.reward, read.temperature) == (
                original.ids,
                original.mask,
                original.logprobs,
                original.reward,
                original.temperature,
            )
    evaluations = {(r["eval_label"], r["after_step"]) for r in kept if r["phase"] == "eval"}
    assert evaluations == set(EVALUATIONS)


def test_a_resume_keeps_each_step_and_evaluation_once(tmp_path: Path) -> None:
    log = _write(tmp_path)
    with log.paths.trajectories.open("ab") as handle:  # a kill in the middle of a line
        handle.write(b'{"id": "step-3/e/a/0", "phase": "train", "st')
    log.keep(1, {("base", 0)})
    kept, failed = _lines(log.paths.trajectories), _lines(log.paths.failed)
    assert [r["id"] for r in kept] == [
        "eval-0/e/t/0",
        "eval-0/e/t/1",
        "step-1/e/a/0",
        "step-1/e/a/1",
        "step-1/e/b/0",
    ]
    assert [r["id"] for r in failed] == ["step-1/e/b/1"]
    log.append(STEPS[2], TrainingTag.train(2), model=MODEL)
    assert [r["step"] for r in _lines(log.paths.trajectories) if r["phase"] == "train"] == [
        1, 1, 1, 2, 2, 2, 2
    ]  # fmt: skip
    log.start(None)  # a fresh run into the same output starts the logs again
    assert not log.paths.trajectories.exists()
    assert not log.paths.failed.exists()


def _reward_points(page: str) -> dict[tuple[str, int], tuple[float, int]]:
    """The reward-by-step chart's points: ``(series, step) -> (mean, rollouts)``."""
    figure = re.search(r'data-chart="reward_by_step">(.*?)</figure>', page)
    assert figure is not None
    points = re.findall(
        r"<title>([^<]*) step (\d+): ([0-9.]+) \((\d+) rollouts\)</title>", figure.group(1)
    )
    return {
        (html.unescape(series), int(step)): (float(mean), int(count))
        for series, step, mean, count in points
    }


def test_the_report_of_a_training_run_shows_each_steps_mean_reward(
    tmp_path: Path, capsys: Any
) -> None:
    _write(tmp_path)
    assert report_main([str(tmp_path)]) == 0  # the trainer's --output
    report = Path(capsys.readouterr().out.strip())
    assert report == tmp_path / "rollouts" / "report.html"
    page = report.read_text()
    # independently: every kept line's reward, grouped by its step fields
    expected: dict[tuple[str, int], list[float]] = {}
    for line in (tmp_path / "rollouts" / "trajectories.jsonl").read_text().splitlines():
        record = json.loads(line)
        key = (
            ("training", record["step"]) if "step" in record else ("held-out", record["after_step"])
        )
        expected.setdefault(key, []).append(record["reward"])
    shown = _reward_points(page)
    assert shown.keys() == expected.keys() == {
        ("training", 1), ("training", 2), ("held-out", 0), ("held-out", 2)
    }  # fmt: skip
    for key, rewards in expected.items():
        assert shown[key] == (round(sum(rewards) / len(rewards), 3), len(rewards)), key
    assert shown[("training", 1)] == (0.5, 3)  # the failed rollout is not in the mean
    assert 'data-chart="tokens"' in page  # the token view's data is there as for any run
    assert '"mask":"000110"' in page


def test_a_batch_runner_report_has_no_reward_by_step(tmp_path: Path) -> None:
    log = RolloutLog(tmp_path)
    log.start(None)
    log.paths.trajectories.write_bytes(
        b"".join(
            json.dumps({k: v for k, v in r.items() if k not in ("phase", "step")}).encode() + b"\n"
            for r in _lines(_write(tmp_path / "train").paths.trajectories)
            if r.get("phase") == "train"
        )
    )
    assert report_main([str(tmp_path)]) == 0
    assert "reward_by_step" not in (tmp_path / "report.html").read_text()
