"""A checkpoint holds what the learner needs to continue: written and read back through the
real learner (its LoRA pairs, Adam's state, the update count), refused when it does not fit,
and named by ``--resume`` when it is broken."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hermes_loop.embedded import default_model_path
from hermes_protocols import ConfigError
from hermes_trainer.checkpoint import CHECKPOINT, LearnerState, read_checkpoint, write_checkpoint
from hermes_trainer.gguf_weights import read_base_weights
from hermes_trainer.learner import LoraLearner
from hermes_trainer.lora import LoraSpec
from hermes_trainer.optimizer import OptimizerSpec

pytestmark = pytest.mark.slow  # the trainer's dependencies (JAX) and the model's weights


def _scrambled(state: LearnerState, seed: int) -> LearnerState:
    """``state`` with every array replaced by random values of its shape and dtype."""
    rng = np.random.default_rng(seed)
    lora = {
        kind: (rng.normal(size=a.shape).astype(a.dtype), rng.normal(size=b.shape).astype(b.dtype))
        for kind, (a, b) in state.lora.items()
    }
    leaves = tuple((rng.normal(size=x.shape) * 100).astype(x.dtype) for x in state.optimizer)
    return LearnerState(lora=lora, optimizer=leaves, updates=7)


def test_a_learner_continues_from_the_checkpoint_another_wrote(tmp_path: Path) -> None:
    base = read_base_weights(default_model_path())
    spec = LoraSpec(rank=2, alpha=4.0)
    written = _scrambled(LoraLearner(base, spec, OptimizerSpec(), seed=0).state(), seed=1)
    assert any(np.issubdtype(x.dtype, np.integer) for x in written.optimizer)  # Adam's count
    write_checkpoint(tmp_path, 5, written)
    checkpoint = read_checkpoint(tmp_path)
    assert checkpoint is not None
    step, read = checkpoint
    assert step == 5
    learner = LoraLearner(base, spec, OptimizerSpec(), seed=2)
    learner.restore(read)
    restored = learner.state()
    assert restored.updates == learner.steps == 7
    assert sorted(restored.lora) == sorted(written.lora)
    for kind, (a, b) in written.lora.items():
        np.testing.assert_array_equal(restored.lora[kind][0], a)
        np.testing.assert_array_equal(restored.lora[kind][1], b)
    assert len(restored.optimizer) == len(written.optimizer)
    for mine, theirs in zip(restored.optimizer, written.optimizer, strict=True):
        assert mine.dtype == theirs.dtype
        np.testing.assert_array_equal(mine, theirs)
    other_rank = LoraLearner(base, LoraSpec(rank=4, alpha=4.0), OptimizerSpec())
    with pytest.raises(ConfigError, match="--lora-rank"):
        other_rank.restore(read)


def test_no_checkpoint_is_none_and_a_broken_one_names_resume(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path) is None  # the run stopped before its first checkpoint
    (tmp_path / CHECKPOINT).write_bytes(b"PK\x03\x04 cut short by a kill")
    with pytest.raises(ConfigError, match=r"--resume: .* is not a readable checkpoint"):
        read_checkpoint(tmp_path)
