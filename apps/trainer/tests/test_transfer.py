"""``python -m hermes_trainer.transfer``: evaluation rewards of trainer runs by kind of task,
read from run directories written by the trainer's own rollout log."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_protocols import AgentResult, Item, Message, Score, ScoredRollout, StopReason
from hermes_protocols.formats import TrainingTag
from hermes_trainer.rollout_log import RolloutLog
from hermes_trainer.transfer import main


def _rollout(family: str, level: int, index: int, reward: float) -> ScoredRollout:
    item = Item(id=f"{family}-d{level}", data={"family": family, "difficulty": level})
    result = AgentResult(
        messages=[Message.user("do it"), Message.assistant("done")],
        stop_reason=StopReason.FINAL_ANSWER,
        turns=1,
    )
    return ScoredRollout(f"e/{item.id}/{index}", "e", item, index, result, Score(reward=reward))


def _run(output: Path, evaluations: dict[str, list[ScoredRollout]]) -> Path:
    log = RolloutLog(output / "rollouts")
    log.start(None)
    log.append([_rollout("write_word", 1, 9, 1.0)], TrainingTag.train(1), model="m")
    for label, rollouts in evaluations.items():
        log.append(rollouts, TrainingTag.evaluation(label, 0), model="m")
    return output


def test_each_cell_is_the_mean_of_its_kind_and_training_rollouts_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(
        tmp_path / "base",
        {
            "base": [
                _rollout("write_word", 1, 0, 1.0),
                _rollout("write_word", 1, 1, 0.0),
                _rollout("write_word", 3, 0, 0.0),
                _rollout("make_tree", 1, 0, 0.5),
            ]
        },
    )
    trained = _run(
        tmp_path / "trained",
        {"init-adapter": [_rollout("write_word", 1, 0, 1.0), _rollout("write_word", 1, 1, 1.0)]},
    )
    assert main([str(base), str(trained)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == f"| family | difficulty | {base} base | {trained} init-adapter |"
    assert rows[2:] == [
        "| make_tree | 1 | 0.500 (0/1) | - |",
        "| write_word | 1 | 0.500 (1/2) | 1.000 (2/2) |",
        "| write_word | 3 | 0.000 (0/1) | - |",
    ]


def test_a_directory_without_rollouts_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2
