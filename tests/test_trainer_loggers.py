"""``--log-to tensorboard,wandb``: what TensorBoard's event files and wandb's offline run hold
(read back with protobuf and wandb's own record type, not the writers) is what
``metrics.jsonl`` and ``eval.jsonl`` hold, step by step; a value that is not a number is left
out on all sides; a resumed run's TensorBoard events continue from its checkpoint's step."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

pytest.importorskip("tensorboardX")
pytest.importorskip("wandb")
pytest.importorskip("hermes_trainer")

from hermes_protocols import ConfigError
from hermes_trainer.config import TrainConfig, config_record
from hermes_trainer.loggers import MetricsLogger, open_loggers
from hermes_trainer.metrics import Evaluation, StepMetrics, append_jsonl

from tests.metrics_logs import (
    Scalars,
    tensorboard_scalars,
    wandb_history,
    wandb_run,
)

pytestmark = pytest.mark.slow  # the trainer's dependencies (matplotlib)


def _step(step: int, reward: float, loss: float | None) -> StepMetrics:
    return StepMetrics(
        step=step,
        rollouts=4,
        mean_reward=reward,
        pass_rate=reward,
        trained_groups=2,
        dropped_groups=0,
        failed_rollouts=0,
        loss=loss,
        log_ratio_mean=0.01 * step,
        log_ratio_max=0.1 * step,
        trainable_tokens=10 * step,
        train_tokens_per_s=None,
        sample_tokens_per_s=123.5,
        sample_s=1.5,
        update_s=2.25,
    )


def _evaluation(label: str, after_step: int, reward: float) -> Evaluation:
    return Evaluation(
        label=label, after_step=after_step, rollouts=8, failed_rollouts=1, mean_reward=reward
    )


def _write(
    output: Path,
    records: list[StepMetrics | Evaluation],
    names: tuple[str, ...],
    start: int | None = None,
) -> None:
    """``records`` into ``metrics.jsonl``/``eval.jsonl`` and the loggers of ``names``, as the
    trainer writes them."""
    config = TrainConfig(output=output, log_to=names)

    async def main() -> None:
        async with open_loggers(
            names, output, start=start, project="hermes-rl-tests", config=config_record(config)
        ) as loggers:
            for record in records:
                name = "metrics.jsonl" if isinstance(record, StepMetrics) else "eval.jsonl"
                append_jsonl(output / name, record)
                for logger in loggers:
                    logger.log(record)

    anyio.run(main)


def _expected(output: Path) -> Scalars:
    """``tag -> step -> value`` of the JSON lines (``null`` left out)."""
    expected: Scalars = {}
    for line in (output / "metrics.jsonl").read_text().splitlines():
        record: dict[str, Any] = json.loads(line)
        step = record.pop("step")
        for key, value in record.items():
            if isinstance(value, int | float):
                expected.setdefault(f"train/{key}", {})[step] = float(value)
    for line in (output / "eval.jsonl").read_text().splitlines():
        record = json.loads(line)
        del record["label"]
        step = record.pop("after_step")
        for key, value in record.items():
            expected.setdefault(f"eval/{key}", {})[step] = float(value)
    return expected


def _close(actual: Scalars, expected: Scalars) -> None:
    assert actual.keys() == expected.keys()
    for tag, values in expected.items():
        assert actual[tag].keys() == values.keys(), tag
        for step, value in values.items():
            assert actual[tag][step] == pytest.approx(value, rel=1e-6), (tag, step)


RECORDS: list[StepMetrics | Evaluation] = [
    _evaluation("base", 0, 0.25),
    _step(1, 0.25, 0.5),
    _step(2, 0.5, math.nan),  # a diverged loss: null in metrics.jsonl, absent elsewhere
    _step(3, 0.75, -0.125),
    _evaluation("trained", 3, 0.875),
]


def test_tensorboard_and_wandb_hold_what_the_json_lines_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    output = tmp_path / "run-a"
    output.mkdir()
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    _write(output, RECORDS, ("tensorboard", "wandb"))
    after = psutil.Process().children(recursive=True)
    assert [c.name() for c in after if c.pid not in before] == [], "wandb's service outlived it"

    expected = _expected(output)
    assert "train/loss" in expected
    assert 2 not in expected["train/loss"]
    assert expected["eval/mean_reward"] == {0: 0.25, 3: 0.875}
    _close(tensorboard_scalars(output / "tensorboard"), expected)

    (run_file,) = (output / "wandb").glob("offline-run-*/run-*.wandb")
    _close(wandb_history(run_file), expected)
    project, name, config = wandb_run(run_file)
    assert (project, name) == ("hermes-rl-tests", "run-a")
    assert config["log_to"] == ["tensorboard", "wandb"]
    assert config["output"] == str(output)


def test_a_resumed_run_continues_the_tensorboard_curve_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    output = tmp_path / "run"
    output.mkdir()
    # the first run logged steps 1-3, was killed after its checkpoint of step 2
    _write(output, [_step(1, 0.25, 0.5), _step(2, 0.5, 0.25), _step(3, 0.0, 9.0)], ("tensorboard",))
    # the resumed run keeps steps 1-2 of metrics.jsonl and runs step 3 again
    lines = (output / "metrics.jsonl").read_text().splitlines(keepends=True)
    (output / "metrics.jsonl").write_text("".join(lines[:2]))
    (output / "eval.jsonl").write_text("")
    _write(output, [_step(3, 0.75, 0.125), _step(4, 1.0, 0.0625)], ("tensorboard",), start=2)

    scalars = tensorboard_scalars(output / "tensorboard")
    assert scalars["train/mean_reward"] == {1: 0.25, 2: 0.5, 3: 0.75, 4: 1.0}
    _close(scalars, _expected(output))


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("tensorboard", "mlflow"), "--log-to: unknown logger 'mlflow'"),
        (("",), "--log-to: unknown logger ''"),
    ],
)
def test_an_unknown_logger_is_one_line_naming_the_option(
    tmp_path: Path, names: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{message}"):
        TrainConfig(output=tmp_path, log_to=names)


def test_a_missing_library_is_one_line_naming_the_option_and_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # how Python marks a module not importable
    with pytest.raises(ConfigError, match=r"^--log-to wandb needs wandb: .* --extra logging$"):
        TrainConfig(output=tmp_path, log_to=("tensorboard", "wandb"))


def test_loggers_are_closed_when_the_run_fails_or_is_cancelled(tmp_path: Path) -> None:
    opened: list[MetricsLogger] = []

    async def run(output: Path, fail: bool) -> None:
        with anyio.CancelScope() as scope:  # Ctrl-C/SIGTERM cancel the run's scope
            async with open_loggers(
                ("tensorboard",), output, start=None, project="p", config={}
            ) as loggers:
                opened.extend(loggers)
                loggers[0].log(_step(1, 0.5, 0.5))
                if fail:
                    raise RuntimeError("the step failed")
                scope.cancel()
                await anyio.sleep(60)

    with pytest.raises(RuntimeError, match="the step failed"):
        anyio.run(run, tmp_path / "failed", True)
    anyio.run(run, tmp_path / "cancelled", False)
    assert [logger.writer.all_writers for logger in opened] == [None, None]  # type: ignore[attr-defined]
    for name in ("failed", "cancelled"):
        scalars = tensorboard_scalars(tmp_path / name / "tensorboard")
        assert scalars["train/mean_reward"] == {1: 0.5}
