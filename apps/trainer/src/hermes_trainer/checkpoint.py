"""Checkpoints of the local learner, for ``--resume``.

One file per run, ``OUTPUT/checkpoint.npz``, atomically replaced after every
``--checkpoint-every`` steps: the step it follows, the learner's update count, each LoRA pair
(``lora/<kind>/a``, ``lora/<kind>/b``) and Adam's state leaves in order (``optimizer/<i>``).
The sampling seeds derive from ``--seed``, the step and the item, so these are all a resumed
run needs to continue the same curve.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import attrs
import numpy as np
from hermes_protocols import ConfigError
from numpy.typing import NDArray

from hermes_trainer.gguf_weights import FloatArray

CHECKPOINT = "checkpoint.npz"


@attrs.frozen(kw_only=True)
class LearnerState:
    """What the local learner needs to continue: its LoRA pairs (per projection kind,
    stacked over layers), Adam's state leaves and how many updates it made."""

    lora: Mapping[str, tuple[FloatArray, FloatArray]]
    optimizer: tuple[NDArray[np.generic], ...]
    updates: int


def write_checkpoint(directory: Path, step: int, state: LearnerState) -> Path:
    """Write ``state`` after ``step`` to ``directory/checkpoint.npz`` (atomically, synced: a
    kill leaves the previous checkpoint or this one). Blocking; call it off the event loop."""
    arrays: dict[str, NDArray[np.generic]] = {
        "step": np.asarray(step, dtype=np.int64),
        "updates": np.asarray(state.updates, dtype=np.int64),
    }
    for kind, (a, b) in state.lora.items():
        arrays[f"lora/{kind}/a"], arrays[f"lora/{kind}/b"] = a, b
    for index, leaf in enumerate(state.optimizer):
        arrays[f"optimizer/{index:04d}"] = leaf
    target = directory / CHECKPOINT
    staging = directory / f".{CHECKPOINT}.partial"
    with staging.open("wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, target)
    return target


def read_checkpoint(directory: Path) -> tuple[int, LearnerState] | None:
    """The step and learner state ``directory``'s checkpoint holds; ``None`` when the run
    wrote none (:class:`ConfigError` naming ``--resume`` when it cannot be read)."""
    path = directory / CHECKPOINT
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.keys())
            kinds = sorted({name.split("/")[1] for name in names if name.startswith("lora/")})
            lora = {k: (data[f"lora/{k}/a"], data[f"lora/{k}/b"]) for k in kinds}
            leaves = tuple(data[n] for n in sorted(n for n in names if n.startswith("optimizer/")))
            step, updates = int(data["step"]), int(data["updates"])
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"--resume: {path} is not a readable checkpoint ({exc})") from exc
    return step, LearnerState(lora=lora, optimizer=leaves, updates=updates)
