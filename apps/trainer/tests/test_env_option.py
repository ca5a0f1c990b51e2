"""The trainer names its environment like the other apps: --env takes any reference,
--env-options its options; --families/--difficulties are endless_terminals' shorthand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_protocols import Environment, Item
from hermes_rollouts import build_environment
from hermes_trainer.cli import build_parser, config_from_args, main
from hermes_trainer.config import TrainConfig
from hermes_trainer.live import OPTION_NAMES, rollout_spec

pytestmark = pytest.mark.slow  # the trainer's dependencies (JAX)


def _config(*argv: str) -> TrainConfig:
    return config_from_args(build_parser().parse_args([*argv, "--output", "unused"]))


def test_endless_terminals_keeps_its_shorthand() -> None:
    spec = rollout_spec(_config("--families", "csv_sum", "--difficulties", "2"))
    assert spec.environment.name == "endless_terminals"
    assert spec.environment.options == {
        "families": ["csv_sum"],
        "difficulties": [2],
        "toolsets": ["terminal"],
    }


def test_a_plugin_file_gets_its_own_options(tmp_path: Path) -> None:
    plugin = tmp_path / "my_env.py"
    plugin.write_text(
        "from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv\n"
        "class Mine(EndlessTerminalsEnv):\n"
        "    name = 'mine'\n"
        "    def __init__(self, config: EndlessTerminalsConfig) -> None:\n"
        "        super().__init__(config)\n"
    )
    config = _config("--env", f"{plugin}:Mine", "--env-options", '{"difficulties": [3]}')
    spec = rollout_spec(config)
    assert spec.environment.options == {"difficulties": [3]}
    environment = build_environment(spec.environment, OPTION_NAMES)
    assert environment.name == "mine"
    assert {item.data["difficulty"] for item in _first(environment, 5)} == {3}


def _first(environment: Environment, count: int) -> list[Item]:
    items = environment.items(seed=0)
    return [next(items) for _ in range(count)]


def test_families_with_another_environment_is_a_config_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--env", "swe_smith_oracle", "--families", "csv_sum", "--output", "unused"])
    assert code == 2
    assert "pass --env-options for swe_smith_oracle" in capsys.readouterr().err
