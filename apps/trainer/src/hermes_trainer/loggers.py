"""``--log-to tensorboard,wandb``: the lines of ``metrics.jsonl``/``eval.jsonl`` also sent to
TensorBoard (``tensorboardX``, into ``OUTPUT/tensorboard/``) and wandb (offline into ``OUTPUT``
unless ``WANDB_API_KEY`` is set), through their own libraries (the ``logging`` extra)."""

from __future__ import annotations

import importlib.util
import math
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
import attrs
from hermes_protocols import ConfigError

from hermes_trainer.metrics import Evaluation, StepMetrics

#: ``--log-to`` name -> the module it needs
LIBRARIES = {"tensorboard": "tensorboardX", "wandb": "wandb"}
#: how long closing a logger (flushing its files, ending the wandb run) may take
CLOSE_TIMEOUT_S = 60.0


def check_log_to(names: Sequence[str]) -> None:
    """:class:`ConfigError` naming ``--log-to`` for an unknown name or a missing library."""
    for name in names:
        if name not in LIBRARIES:
            raise ConfigError(
                f"--log-to: unknown logger {name!r} (choose from {', '.join(LIBRARIES)})"
            )
        if importlib.util.find_spec(LIBRARIES[name]) is None:
            raise ConfigError(
                f"--log-to {name} needs {LIBRARIES[name]}: uv sync --inexact --package "
                "hermes-trainer --extra logging"
            )


def scalars(record: StepMetrics | Evaluation) -> tuple[int, dict[str, float]]:
    """The step and the finite numbers of a line (``train/<field>`` of a step,
    ``eval/<field>`` of an evaluation at its ``after_step``: one held-out curve, whatever the
    label)."""
    if isinstance(record, StepMetrics):
        step, prefix = record.step, "train"
    else:
        step, prefix = record.after_step, "eval"
    values = {
        f"{prefix}/{key}": float(value)
        for key, value in attrs.asdict(record).items()
        if key not in ("step", "after_step")
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    }
    return step, values


class MetricsLogger(Protocol):
    """One library the metrics go to; its calls block (run them in a worker thread)."""

    def log(self, record: StepMetrics | Evaluation) -> None: ...

    def close(self) -> None: ...


class TensorBoardLogger:
    """Scalars into ``OUTPUT/tensorboard/``; a resumed run from step ``start`` purges the
    events after it (steps a killed run logged past its checkpoint are not shown twice)."""

    def __init__(self, output: Path, start: int | None) -> None:
        from tensorboardX import SummaryWriter  # type: ignore[import-untyped]

        purge = None if start is None else start + 1
        # the file's name (the second it was made in, then this suffix) orders it after the
        # files it continues, and a run resumed in the same second does not overwrite them
        suffix = f".from-step-{purge or 1:09d}.{secrets.token_hex(4)}"
        self.writer = SummaryWriter(
            logdir=str(output / "tensorboard"), purge_step=purge, filename_suffix=suffix
        )

    def log(self, record: StepMetrics | Evaluation) -> None:
        step, values = scalars(record)
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A wandb run named after the output directory, with the run's options as its config:
    offline into ``OUTPUT/wandb/`` unless ``WANDB_API_KEY`` is set (a resumed run is a new
    run)."""

    def __init__(self, output: Path, project: str, config: dict[str, Any]) -> None:
        import wandb

        self.run = wandb.init(
            project=project,
            name=output.resolve().name,
            dir=str(output),
            config=config,
            mode="online" if os.environ.get("WANDB_API_KEY") else "offline",
            settings=wandb.Settings(console="off"),
        )

    def log(self, record: StepMetrics | Evaluation) -> None:
        step, values = scalars(record)
        self.run.log(values, step=step)

    def close(self) -> None:
        """End the run, then stop wandb's service process (``wandb-core``, a child of this
        process that outlives ``finish`` and would outlive the trainer in a longer process)."""
        import wandb

        self.run.finish()
        wandb.teardown()


def _open(
    name: str, output: Path, start: int | None, project: str, config: dict[str, Any]
) -> MetricsLogger:
    if name == "tensorboard":
        return TensorBoardLogger(output, start)
    return WandbLogger(output, project, config)


@asynccontextmanager
async def open_loggers(
    names: Sequence[str],
    output: Path,
    *,
    start: int | None,
    project: str,
    config: dict[str, Any],
) -> AsyncIterator[list[MetricsLogger]]:
    """The loggers of ``names`` (``start``: the step a resumed run continues from), each
    closed on exit, on error and on cancel alike."""
    loggers: list[MetricsLogger] = []
    try:
        for name in names:
            loggers.append(
                await anyio.to_thread.run_sync(_open, name, output, start, project, config)
            )
        yield loggers
    finally:
        with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            for logger in loggers:
                await anyio.to_thread.run_sync(logger.close)
