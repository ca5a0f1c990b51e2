"""The Tinker path's options fail before anything starts, naming what to change."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_protocols import BackendError, ConfigError
from hermes_trainer.cli import EXIT_CONFIG, build_parser, config_from_args, main
from hermes_trainer.config import TrainConfig
from hermes_trainer.tinker_api import service_client
from hermes_trainer.tinker_spec import TinkerSpec

pytestmark = pytest.mark.slow


def test_tinker_samples_at_temperature_one_only(tmp_path: Path) -> None:
    spec = TinkerSpec(base_model="m", url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="pass --temperature 1"):
        TrainConfig(output=tmp_path, tinker=spec, temperature=0.6)
    with pytest.raises(ValueError, match="samples its own groups"):
        TrainConfig(output=tmp_path, tinker=spec, temperature=1.0, atropos_url="http://x")
    assert TrainConfig(output=tmp_path, tinker=spec, temperature=1.0).tinker == spec


def test_the_command_line_maps_onto_the_tinker_spec(tmp_path: Path) -> None:
    argv = ["--tinker-model", "/models/smollm2", "--tinker-url", "http://127.0.0.1:9"]
    argv += ["--temperature", "1", "--output", str(tmp_path)]
    config = config_from_args(build_parser().parse_args(argv))
    assert config.tinker == TinkerSpec(base_model="/models/smollm2", url="http://127.0.0.1:9")
    assert config.tinker.tokenizer_dir == "/models/smollm2"
    config = config_from_args(build_parser().parse_args([*argv, "--tinker-timeout", "30"]))
    assert config.tinker is not None
    assert config.tinker.timeout_s == 30.0
    with pytest.raises(ConfigError, match="--tinker-timeout must be > 0"):
        config_from_args(build_parser().parse_args([*argv, "--tinker-timeout", "0"]))


def test_tinker_options_without_a_model_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--tinker-url", "http://127.0.0.1:9", "--output", str(tmp_path / "run")])
    assert code == EXIT_CONFIG
    error = capsys.readouterr().err
    assert "--tinker-url, --tokenizer and --tinker-timeout need --tinker-model" in error
    assert not (tmp_path / "run").exists()


def test_the_hosted_service_needs_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(BackendError, match="TINKER_API_KEY"):
        service_client(TinkerSpec(base_model="Qwen/Qwen3-8B"))
