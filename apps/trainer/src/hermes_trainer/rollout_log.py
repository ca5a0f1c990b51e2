"""Every rollout the live source sampled, in the batch runner's run-directory format.

``OUTPUT/rollouts/trajectories.jsonl`` holds the scored rollouts and ``failed.jsonl`` the
failed ones, each a trajectory record (:func:`hermes_rollouts.rollout_record`, the batch
runner's writer) with its :class:`~hermes_protocols.formats.TrainingTag` (the training step,
or the evaluation) and an id unique in the run (``step-N/`` or ``eval-N/`` before the
rollout's own id); ``tokenizer.json`` gives ``hermes-report`` the token text. A step's records
are appended at once and fsynced, so a kill loses at most the step in progress; a resumed run
first drops what was written after its checkpoint (:meth:`RolloutLog.keep`), so each step is
there exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection, Sequence
from pathlib import Path

from hermes_protocols import JSONObject, ScoredRollout
from hermes_protocols.formats import TRAIN_PHASE, RunDirectory, TrainingTag
from hermes_rollouts import encode_record, rollout_id, rollout_record


def tagged_record(rollout: ScoredRollout, tag: TrainingTag, *, model: str) -> JSONObject:
    """The trajectory record of ``rollout`` with ``tag``'s fields, its id prefixed by the
    step or evaluation it belongs to."""
    prefix = f"step-{tag.step}" if tag.phase == TRAIN_PHASE else f"eval-{tag.step}"
    record_id = f"{prefix}/{rollout_id(rollout.env, rollout.item.id, rollout.group_index)}"
    record = rollout_record(rollout, record_id=record_id, model=model)
    record.update(tag.fields())
    return record


def _failed(rollout: ScoredRollout) -> bool:
    return rollout.score is None or rollout.failure is not None


class RolloutLog:
    """The run directory of a training run's rollouts (blocking: call it from a worker
    thread)."""

    def __init__(self, root: Path) -> None:
        self.paths = RunDirectory(root)

    def start(self, tokenizer_json: Path | None) -> None:
        """An empty run directory (a fresh run starts its logs again) with ``tokenizer_json``
        copied in when given."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        for path in self.paths.logs:
            path.unlink(missing_ok=True)
        self.copy_tokenizer(tokenizer_json)

    def copy_tokenizer(self, tokenizer_json: Path | None) -> None:
        """Copy the model's ``tokenizer.json`` in, once (no-op without one)."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        exists = self.paths.tokenizer.exists()
        if tokenizer_json is not None and tokenizer_json.is_file() and not exists:
            shutil.copyfile(tokenizer_json, self.paths.tokenizer)

    def append(self, rollouts: Sequence[ScoredRollout], tag: TrainingTag, *, model: str) -> None:
        """The records of ``rollouts`` (one step's or one evaluation's), appended and
        fsynced."""
        lines: dict[Path, list[bytes]] = {self.paths.trajectories: [], self.paths.failed: []}
        for rollout in rollouts:
            path = self.paths.failed if _failed(rollout) else self.paths.trajectories
            lines[path].append(encode_record(tagged_record(rollout, tag, model=model)))
        for path, encoded in lines.items():
            if encoded:
                with path.open("ab") as handle:
                    handle.write(b"".join(encoded))
                    handle.flush()
                    os.fsync(handle.fileno())

    def keep(self, step: int, evaluations: Collection[tuple[str, int]]) -> None:
        """Keep the training records of steps up to ``step`` and the records of
        ``evaluations`` (``(label, after_step)`` each, those ``eval.jsonl`` kept); drop the
        rest, a torn last line included (each log replaced atomically)."""
        for path in self.paths.logs:
            if not path.is_file():
                continue
            kept = [line for line in path.read_bytes().splitlines(keepends=True)
                    if _kept(line, step, evaluations)]  # fmt: skip
            staging = path.with_name(f".{path.name}.partial")
            with staging.open("wb") as handle:
                handle.write(b"".join(kept))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staging, path)


def _kept(line: bytes, step: int, evaluations: Collection[tuple[str, int]]) -> bool:
    if not line.endswith(b"\n"):
        return False
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return False
    tag = TrainingTag.of(record) if isinstance(record, dict) else None
    if tag is None:
        return False
    if tag.phase == TRAIN_PHASE:
        return tag.step <= step
    return (tag.label, tag.step) in evaluations
