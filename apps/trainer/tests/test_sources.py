"""The offline source (batch runner trajectories) and the run's options: grouping by item,
refusing another model's records or broken lines, epochs, and contradictory options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hermes_protocols import ConfigError
from hermes_trainer.cli import build_parser, config_from_args
from hermes_trainer.config import TrainConfig
from hermes_trainer.samples import Sample
from hermes_trainer.trajectories import TrajectorySource, read_groups

pytestmark = pytest.mark.slow

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _record(item: str, index: int, reward: float, model: str = f"embedded:{MODEL}") -> str:
    record: dict[str, Any] = {
        "id": f"env/{item}/{index}",
        "env": "env",
        "item": {"id": item},
        "model": model,
        "reward": reward,
        "tokens": [1, 2, 3],
        "masks": [0, 1, 1],
        "logprobs": [0.0, -0.5, -0.25],
        "token_source": "sampler",
        "logprob_mode": "sampled",
        "sampling": {"temperature": 0.7, "missing_logprobs": []},
    }
    return json.dumps(record)


def test_records_group_by_item_whatever_order_they_finished_in(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lines = [
        _record("a", 0, 1.0),
        _record("b", 0, 0.0),
        _record("a", 1, 0.0),
        "",
        _record("b", 1, 1.0),
    ]
    (run / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    groups = read_groups([run], MODEL)
    assert [[s.id for s in g] for g in groups] == [["env/a/0", "env/a/1"], ["env/b/0", "env/b/1"]]
    assert groups[0][0].temperature == 0.7


def test_another_models_records_and_broken_lines_are_errors(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(_record("a", 0, 1.0, model="vllm:Qwen") + "\n")
    with pytest.raises(ConfigError, match=r"other.jsonl:1 was sampled by 'vllm:Qwen'"):
        read_groups([other], MODEL)
    assert len(read_groups([other], None)) == 1  # sft does not need the sampler's model
    broken = tmp_path / "broken.jsonl"
    broken.write_text(_record("a", 0, 1.0) + "\n{\n")
    with pytest.raises(ConfigError, match=r"broken.jsonl:2: not JSON"):
        read_groups([broken], MODEL)
    with pytest.raises(ConfigError, match="cannot read trajectories"):
        read_groups([tmp_path / "missing.jsonl"], MODEL)


def test_every_epoch_visits_every_group_once() -> None:
    groups = [(_sample(f"{name}/0"),) for name in "abcde"]
    source = TrajectorySource(groups, per_step=2, epochs=2, seed=0)
    assert source.steps == 5

    async def collect_all() -> list[str]:
        seen = []
        for step in range(1, 7):
            collected = await source.collect(step)
            if collected is None:
                assert step == 6
                break
            seen += [group[0].id for group in collected.groups]
        return seen

    seen = anyio.run(collect_all)
    assert sorted(seen[:5]) == sorted(seen[5:]) == [f"{n}/0" for n in "abcde"]


def _sample(rollout_id: str) -> Sample:
    return Sample(id=rollout_id, reward=1.0, ids=(1,), mask=(0,), logprobs=(0.0,), temperature=1.0)


def test_contradictory_options_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        TrainConfig(output=Path("o"), atropos_url="http://x", trajectories=(Path("t"),))
    with pytest.raises(ValueError, match="live sampler only"):
        TrainConfig(output=Path("o"), trajectories=(Path("t"),), eval_items=2)
    with pytest.raises(ValueError, match="--temperature"):
        TrainConfig(output=Path("o"), temperature=0.0)


def test_grpo_sampling_its_own_groups_needs_two_rollouts_per_item() -> None:
    with pytest.raises(ConfigError, match="--group-size must be >= 2 for GRPO"):
        TrainConfig(output=Path("o"), group_size=1)
    # SFT trains single rollouts; trajectory groups are the records' items, not --group-size
    assert TrainConfig(output=Path("o"), group_size=1, objective="sft").group_size == 1
    assert TrainConfig(output=Path("o"), group_size=1, trajectories=(Path("t"),)).group_size == 1


def test_the_command_line_selects_the_source_and_objective(tmp_path: Path) -> None:
    argv = ["--trajectories", str(tmp_path / "a"), "--trajectories", str(tmp_path / "b")]
    argv += ["--objective", "sft", "--min-reward", "0.5", "--epochs", "3", "--output", "o"]
    config = config_from_args(build_parser().parse_args(argv))
    assert config.trajectories == (tmp_path / "a", tmp_path / "b")
    assert (config.objective, config.min_reward, config.epochs) == ("sft", 0.5, 3)
    assert config.adapter_path == Path("o") / "adapter.gguf"
    argv = ["--atropos-url", "http://127.0.0.1:8000", "--adapter", "shared.gguf"]
    config = config_from_args(build_parser().parse_args(argv))
    assert config.atropos_url == "http://127.0.0.1:8000"
    assert config.adapter_path == Path("shared.gguf")
