from __future__ import annotations

from pathlib import Path

import pytest
from hermes_batch_runner.config import (
    DEFAULT_ENV_ITEMS,
    RunConfig,
    config_from_options,
    config_to_json,
    load_config_file,
    resolve_for_resume,
)
from hermes_batch_runner.errors import ResumeMismatch
from hermes_protocols import ConfigError
from hypothesis import given
from hypothesis import strategies as st


def test_defaults_run_the_embedded_model_on_bwrap_with_a_few_items() -> None:
    config = config_from_options({})
    assert config.env == "endless_terminals"
    assert config.server_type == "embedded"
    assert config.sandbox == "bwrap"
    assert config.item_limit == DEFAULT_ENV_ITEMS
    assert config_from_options({"dataset": "x.jsonl"}).item_limit is None


def test_yaml_and_toml_files_give_the_same_config(tmp_path: Path) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("num-items: 5\ntoolsets: [terminal, file]\nextra_body: {a: 1}\n")
    toml_file = tmp_path / "c.toml"
    toml_file.write_text('num_items = 5\ntoolsets = ["terminal", "file"]\n[extra_body]\na = 1\n')
    a = config_from_options(load_config_file(yaml_file))
    b = config_from_options(load_config_file(toml_file))
    assert a == b
    assert a.num_items == 5
    assert a.toolsets == ("terminal", "file")


def test_unknown_keys_and_bad_values_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("max_turn: 3\n")
    with pytest.raises(ConfigError, match="max_turn"):
        load_config_file(bad)
    with pytest.raises(ConfigError, match="concurrency"):
        config_from_options({"concurrency": 0})
    with pytest.raises(ConfigError, match="sandbox"):
        config_from_options({"sandbox": "chroot"})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "missing.yaml")


def test_a_model_url_means_an_openai_server_unless_told_otherwise() -> None:
    assert config_from_options({"model_url": "http://x"}).server_type == "openai"
    assert (
        config_from_options({"model_url": "http://x", "server_type": "sglang"}).server_type
        == "sglang"
    )


def test_resume_refuses_different_options_naming_the_keys() -> None:
    recorded = config_to_json(config_from_options({"num_items": 4, "seed": 1}))
    with pytest.raises(ResumeMismatch) as info:
        resolve_for_resume(recorded, {"num_items": 5, "seed": 2, "max_turns": 4})
    assert info.value.keys == ("num_items", "seed")
    assert "num_items" in str(info.value)
    resumed = resolve_for_resume(recorded, {"concurrency": 8, "num_items": 4})
    assert resumed.concurrency == 8
    assert resumed.seed == 1


@given(
    num_items=st.none() | st.integers(1, 1000),
    seed=st.integers(-(2**31), 2**31),
    toolsets=st.lists(st.sampled_from(["terminal", "file", "web"]), unique=True),
    temperature=st.floats(0, 2),
    extra=st.none() | st.dictionaries(st.text(max_size=5), st.integers()),
)
def test_config_round_trips_through_run_json(
    num_items: int | None,
    seed: int,
    toolsets: list[str],
    temperature: float,
    extra: dict[str, int] | None,
) -> None:
    config = RunConfig(
        num_items=num_items, seed=seed, toolsets=toolsets, temperature=temperature, extra_body=extra
    )
    data = config_to_json(config)
    assert config_from_options(data) == config
    assert resolve_for_resume(data, {}) == config


def test_rollouts_in_flight_are_capped_by_the_pool() -> None:
    assert config_from_options({"concurrency": 16}).in_flight == 4
    assert (
        config_from_options(
            {"concurrency": 16, "sandbox_slots": 8, "sandbox_max_hosts": 3}
        ).in_flight
        == 16
    )
    assert config_from_options({"concurrency": 3}).in_flight == 3
