"""A training run's rollouts: the trainer's run directory (``OUTPUT/rollouts``, in the batch
runner's format) and the fields that place each record in the run.

A record sampled for training step ``step`` carries ``{"phase": "train", "step": step}``; one
of a held-out evaluation ``{"phase": "eval", "after_step": n, "eval_label": label}`` (the
weights after ``n`` updates, ``label`` as in the trainer's ``eval.jsonl``). Records of other
runs carry neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hermes_protocols.json_types import JSONObject

#: the run directory of a training run's rollouts, inside the trainer's ``--output``
TRAINING_ROLLOUTS_DIR = "rollouts"
TRAIN_PHASE = "train"
EVAL_PHASE = "eval"


def training_rollouts(output: Path) -> Path:
    """Where a trainer writing to ``output`` keeps its rollouts."""
    return output / TRAINING_ROLLOUTS_DIR


@attrs.frozen(slots=True)
class TrainingTag:
    """Where a record belongs in a training run: a training step's rollouts (``phase`` train,
    ``step``) or an evaluation's (``phase`` eval, ``step``: the updates before it, ``label``)."""

    phase: str
    step: int
    label: str | None = None

    @classmethod
    def train(cls, step: int) -> TrainingTag:
        return cls(TRAIN_PHASE, step)

    @classmethod
    def evaluation(cls, label: str, after_step: int) -> TrainingTag:
        return cls(EVAL_PHASE, after_step, label)

    def fields(self) -> JSONObject:
        """The record fields of this tag."""
        if self.phase == TRAIN_PHASE:
            return {"phase": TRAIN_PHASE, "step": self.step}
        return {"phase": EVAL_PHASE, "after_step": self.step, "eval_label": self.label}

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> TrainingTag | None:
        """The tag of ``record`` (``None``: not a training run's record)."""
        phase = record.get("phase")
        key = {TRAIN_PHASE: "step", EVAL_PHASE: "after_step"}.get(str(phase))
        step = record.get(key) if key is not None else None
        if not isinstance(step, int) or isinstance(step, bool):
            return None
        if phase == TRAIN_PHASE:
            return cls.train(step)
        label = record.get("eval_label")
        return cls.evaluation(str(label) if label is not None else f"step {step}", step)
