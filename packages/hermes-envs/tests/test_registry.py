"""Environment registry: lookup by name, typed configs, helpful errors."""

from __future__ import annotations

import pytest
from hermes_envs import (
    EndlessTerminalsConfig,
    EndlessTerminalsEnv,
    EnvRegistry,
    EnvSpec,
    SweSmithOracleEnv,
    TerminalBenchEnv,
    default_registry,
)
from hermes_protocols import ConfigError, Environment, EnvironmentNotFound


def test_shipped_environments_are_registered() -> None:
    registry = default_registry()
    assert registry.names() == ("endless_terminals", "swe_smith_oracle", "terminal_bench")
    for name, cls in [
        ("endless_terminals", EndlessTerminalsEnv),
        ("swe_smith_oracle", SweSmithOracleEnv),
        ("terminal_bench", TerminalBenchEnv),
    ]:
        env = registry.create(name)
        assert isinstance(env, cls)
        assert isinstance(env, Environment)
        assert env.name == name


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(EnvironmentNotFound) as info:
        default_registry().create("endless_terminal")
    message = str(info.value)
    assert "endless_terminal'" in message
    for name in ("endless_terminals", "swe_smith_oracle", "terminal_bench"):
        assert name in message


def test_configs_are_typed() -> None:
    registry = default_registry()
    env = registry.create("endless_terminals", {"families": ["csv_sum"], "difficulties": [2]})
    assert isinstance(env, EndlessTerminalsEnv)
    assert env.config == EndlessTerminalsConfig(families=("csv_sum",), difficulties=(2,))
    with pytest.raises(ConfigError, match=r"extra fields found \(familes\) @ options"):
        registry.create("endless_terminals", {"familes": ["csv_sum"]})
    with pytest.raises(ConfigError, match=r"unknown task families \['no_such_family'\]"):
        registry.create("endless_terminals", {"families": ["no_such_family"]})
    with pytest.raises(ConfigError, match=r"expected tuple @ options.families"):
        registry.create("endless_terminals", {"families": 3})
    with pytest.raises(ConfigError, match="takes a EndlessTerminalsConfig"):
        registry.create("endless_terminals", object())


def test_duplicate_registration_is_refused() -> None:
    registry = EnvRegistry()
    spec = EnvSpec("e", EndlessTerminalsConfig, EndlessTerminalsEnv)
    registry.register(spec)
    with pytest.raises(ConfigError, match="already"):
        registry.register(spec)


def test_literal_and_path_fields_structure_from_plain_values(tmp_path: object) -> None:
    env = default_registry().create(
        "swe_smith_oracle", {"source": "jsonl", "jsonl_path": "/x.jsonl", "reward": "shaped"}
    )
    assert isinstance(env, SweSmithOracleEnv)
    assert env.config.reward == "shaped"
    with pytest.raises(ConfigError):
        default_registry().create("swe_smith_oracle", {"reward": "sometimes"})
    with pytest.raises(ConfigError, match="jsonl_path"):
        default_registry().create("swe_smith_oracle", {"source": "jsonl"})
