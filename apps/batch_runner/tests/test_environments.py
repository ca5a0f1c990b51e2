"""``--env NAME`` reaches every environment of hermes-envs' default registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_batch_runner.cli import build_parser, resolve
from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.environments import build_environment
from hermes_envs import default_registry
from hermes_protocols import EnvironmentNotFound, Message


def _config(tmp_path: Path, *argv: str) -> RunConfig:
    args = vars(build_parser().parse_args([*argv, "--output", str(tmp_path / "run")]))
    return resolve(args).config


def test_terminal_bench_is_reachable_from_the_command_line(tmp_path: Path) -> None:
    config = _config(tmp_path, "--env", "terminal_bench", "--num-items", "1")
    environment, items = build_environment(config)
    assert environment.name == "terminal_bench"
    assert len(items) == 1
    expected = next(iter(default_registry().create("terminal_bench").items(seed=0)))
    assert items[0].id == expected.id


@pytest.mark.parametrize("name", default_registry().names())
def test_every_registered_environment_builds_with_a_system_prompt(
    tmp_path: Path, name: str
) -> None:
    config = _config(tmp_path, "--env", name, "--num-items", "1", "--system-prompt", "Be brief.")
    environment, items = build_environment(config)
    assert environment.name == name
    assert environment.prompt(items[0])[0] == Message.system("Be brief.")


def test_an_unknown_environment_names_the_registered_ones(tmp_path: Path) -> None:
    config = _config(tmp_path, "--env", "nope")
    with pytest.raises(EnvironmentNotFound, match="terminal_bench"):
        build_environment(config)
