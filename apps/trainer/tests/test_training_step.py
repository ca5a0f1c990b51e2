"""Two real steps of the closed loop: the embedded model samples groups of write_word tasks
in bubblewrap sandboxes, the verifier scores them, the learner updates the LoRA adapter, the
sampler hot-loads it, and the second step samples from the updated weights."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
import numpy as np
import pytest
from hermes_trainer.config import MEASURED_RECIPE, TrainConfig
from hermes_trainer.live import LiveSource
from hermes_trainer.loop import open_trainer
from hermes_trainer.lora import LoraSpec
from hermes_trainer.metrics import read_jsonl


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.e2e
def test_a_training_step_moves_the_sampler_the_way_the_advantages_point(tmp_path: Path) -> None:
    # seed 0: the first step's first group holds both a solved and a failed rollout
    config = attrs.evolve(
        TrainConfig(
            output=tmp_path,
            steps=2,
            groups_per_step=2,
            group_size=4,
            seed=0,
            threads=1,
            lora=LoraSpec(rank=4, alpha=8.0),
        ),
        **MEASURED_RECIPE,
    )

    async def main() -> None:
        async with open_trainer(config) as trainer:
            first = await trainer.step(1)
            assert first is not None
            assert first.trained_groups >= 1, "seed 0 no longer gives a mixed group; pick another"
            assert first.log_ratio_mean is not None
            assert first.log_ratio_max is not None
            # step 0: trainer and sampler run the same weights; only llama.cpp's quantized
            # arithmetic separates them (a fidelity bug shows up as nats, not hundredths)
            assert first.log_ratio_mean < 0.1
            assert first.log_ratio_max < 2.0
            assert isinstance(trainer.source, LiveSource)
            backend = trainer.source.session.model.model.backend
            assert first.weights == str(config.adapter_path)
            assert backend.runtime.lora_path == config.adapter_path
            batch = trainer.last_batch
            assert batch is not None
            sequences = [sequence for group in batch.groups for sequence in group.sequences]
            # from the first trained id on (the prompt's logits are not needed); a group's
            # shared prompt is evaluated once per weights (fresh=False)
            starts = [s.mask.index(1) if 1 in s.mask else len(s.mask) - 1 for s in sequences]

            async def scores() -> list[np.ndarray]:
                return [
                    np.array(await backend.score(s.ids, start=start, fresh=False))
                    for s, start in zip(sequences, starts, strict=True)
                ]

            after = await scores()
            await backend.load_lora(None)
            before = await scores()
            await backend.load_lora(config.adapter_path)
            moved = 0.0
            for sequence, start, new, old in zip(sequences, starts, after, before, strict=True):
                on = np.array(sequence.mask[start:]) > 0
                assert np.abs(new - old).max() > 1e-3  # the weights changed
                moved += sequence.advantage * float((new - old)[on].sum())
            assert moved > 0  # solved rollouts got likelier, failed ones less likely
            second = await trainer.step(2)
            assert second is not None
            assert second.rollouts == 8
            assert second.policy_lag == 0.0
            if second.log_ratio_mean is not None:  # sampled with the adapter the learner has
                assert second.log_ratio_mean < 0.1

    anyio.run(main)
    lines = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m.step for m in lines] == [1, 2]
    assert (tmp_path / "reward.png").stat().st_size > 1000
