"""The runner's options -> the assembly's RolloutSpec, and this CLI's flags in its errors."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest
from hermes_batch_runner.cli import _default_wiring, build_parser, resolve
from hermes_batch_runner.config import RunConfig, config_from_options
from hermes_batch_runner.wiring import OPTION_NAMES, rollout_spec
from hermes_envs import default_registry
from hermes_protocols import ConfigError, Message
from hermes_rollouts import Credentials, build_environment, spec_problems, validate
from hermes_sandbox.factory import build_backend


def _config(tmp_path: Path, *argv: str) -> RunConfig:
    args = vars(build_parser().parse_args([*argv, "--output", str(tmp_path / "run")]))
    return resolve(args).config


def test_embedded_model_flag_is_the_gguf_file() -> None:
    spec = rollout_spec(RunConfig(model="/m/x.gguf", rollout_timeout=42), Credentials(api_key="k"))
    assert spec.model.server_type == "embedded"
    assert spec.model.gguf_path == "/m/x.gguf"
    assert spec.model.model is None
    assert spec.model.timeout_s == 42
    assert spec.budgets.agent_phase_timeout_s == 42 + 60


def test_server_flags_map_onto_the_spec() -> None:
    config = RunConfig(
        server_type="vllm", model_url="http://h/v1", model="m", tokenizer="/t", extra_body={"a": 1}
    )
    model = rollout_spec(config, Credentials(api_key="sk")).model
    assert (model.base_url, model.model, model.tokenizer, model.api_key) == (
        "http://h/v1",
        "m",
        "/t",
        "sk",
    )
    assert model.extra_body == {"a": 1}
    assert model.gguf_path is None


def test_every_problem_is_reported_at_once_with_this_clis_flags() -> None:
    config = RunConfig(
        server_type="sglang",
        model_url="http://127.0.0.1:9",
        sandbox="nomad",
        max_tokens=5000,
        toolsets=("terminal", "web"),
    )
    problems = spec_problems(rollout_spec(config, Credentials()), OPTION_NAMES)
    text = "\n".join(problems)
    assert "--server-type sglang needs --tokenizer" in text
    assert "--sandbox nomad needs --nomad-address" in text
    assert "--sandbox nomad needs --sandbox-image" in text
    assert "--max-tokens (5000) must be below --context-tokens (4096)" in text
    assert "unknown toolset(s) web in --toolsets" in text
    assert len(problems) == 5


@pytest.mark.parametrize(
    ("options", "backend_name"),
    [
        ({}, "bwrap"),
        ({"sandbox": "local"}, "local"),
        ({"sandbox": "docker", "sandbox_image": "python:3.12"}, "docker"),
        ({"sandbox": "modal"}, "modal"),
        ({"sandbox": "remote", "sandbox_url": ["http://127.0.0.1:1"]}, "remote"),
        (
            {"sandbox": "nomad", "nomad_address": "http://127.0.0.1:4646", "sandbox_image": "i"},
            "nomad",
        ),
    ],
)
def test_every_sandbox_option_builds_its_backend(
    options: dict[str, object], backend_name: str
) -> None:
    spec = rollout_spec(config_from_options(options), Credentials(sandbox_token="t"))
    validate(spec, OPTION_NAMES)
    assert build_backend(spec.sandbox).name == backend_name


def test_missing_sandbox_token_is_named() -> None:
    config = config_from_options({"sandbox": "remote", "sandbox_url": "http://127.0.0.1:1"})
    with pytest.raises(ConfigError, match=r"--sandbox-token or \$HERMES_SANDBOX_TOKEN"):
        validate(rollout_spec(config, Credentials()), OPTION_NAMES)


def test_pool_follows_the_options() -> None:
    config = config_from_options({"sandbox_slots": 3, "sandbox_max_hosts": 2, "output": "x"})
    pool = rollout_spec(config, Credentials()).pool
    assert (pool.slots_per_host, pool.max_hosts, pool.capacity) == (3, 2, 6)
    assert pool.name.startswith("batch-")


def test_terminal_bench_is_reachable_from_the_command_line(tmp_path: Path) -> None:
    config = _config(tmp_path, "--env", "terminal_bench", "--num-items", "1")
    environment = build_environment(rollout_spec(config, Credentials()).environment)
    assert environment.name == "terminal_bench"
    expected = next(iter(default_registry().create("terminal_bench").items(seed=0)))
    assert next(iter(environment.items(seed=0))).id == expected.id


@pytest.mark.parametrize("name", default_registry().names())
def test_every_registered_environment_builds_with_a_system_prompt(
    tmp_path: Path, name: str
) -> None:
    config = _config(tmp_path, "--env", name, "--num-items", "1", "--system-prompt", "Be brief.")
    environment = build_environment(rollout_spec(config, Credentials()).environment)
    (item,) = itertools.islice(environment.items(seed=0), 1)
    assert environment.name == name
    prompt = environment.prompt(item)
    assert Message.system("Be brief.") in prompt


def test_an_unknown_environment_names_the_registered_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"set --env to one of .*terminal_bench"):
        _config(tmp_path, "--env", "nope")
    assert not (tmp_path / "run").exists()


def test_the_embedded_model_keeps_one_kv_sequence_per_rollout_in_flight() -> None:
    config = RunConfig(concurrency=8, sandbox_slots=3, sandbox_max_hosts=2)
    assert rollout_spec(config, Credentials()).model.concurrency == 6  # capped by the pool
    config = RunConfig(concurrency=2, sandbox_slots=8)
    assert rollout_spec(config, Credentials()).model.concurrency == 2


def test_env_options_reach_the_environment_and_bad_ones_name_the_flag(tmp_path: Path) -> None:
    options = '{"families": ["write_word"], "difficulties": [1]}'
    config = _config(tmp_path, "--env-options", options, "--num-items", "1")
    environment = build_environment(rollout_spec(config, Credentials()).environment)
    (item,) = itertools.islice(environment.items(seed=0), 1)
    assert item.id.startswith("write_word-d1-")
    bad = tmp_path / "bad"
    with pytest.raises(ConfigError, match=r"--env-options: .*unknown task families \['nope'\]"):
        _config(bad, "--env-options", '{"families": ["nope"]}')
    assert not (bad / "run").exists()


COUNTING_ENV = """
from pathlib import Path

from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv


def make() -> EndlessTerminalsEnv:
    calls = Path(__file__).with_suffix(".calls")
    calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
    return EndlessTerminalsEnv(EndlessTerminalsConfig())
"""


def test_a_file_environment_is_resolved_once_and_handed_to_the_run(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "my_env.py"
    path.parent.mkdir()
    path.write_text(COUNTING_ENV)
    args = vars(build_parser().parse_args(["--env", f"{path}:make", "--output", str(tmp_path)]))
    resolved = resolve(args)
    assert resolved.environment.name == "endless_terminals"
    assert path.with_suffix(".calls").read_text() == "x"
    wiring = _default_wiring(resolved)
    assert isinstance(wiring, functools.partial)
    assert wiring.keywords["environment"] is resolved.environment


def test_image_aliases_reach_the_docker_backend_and_name_the_flag(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        "--sandbox",
        "docker",
        "--sandbox-image-alias",
        "ubuntu:24.04=local:1",
        "--sandbox-image-alias",
        "python:3.11-slim=local:2",
    )
    spec = rollout_spec(config, Credentials())
    assert spec.sandbox.image_aliases == (
        ("python:3.11-slim", "local:2"),
        ("ubuntu:24.04", "local:1"),
    )
    names = {k.removeprefix("sandbox."): v for k, v in OPTION_NAMES.items()}
    backend = build_backend(spec.sandbox, option_names=names)
    assert backend.config.image_aliases == spec.sandbox.image_aliases  # type: ignore[attr-defined]
    assert "--sandbox-image-alias NAME=IMAGE" in backend.config.alias_option  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="--sandbox-image-alias takes NAME=IMAGE"):
        _config(tmp_path, "--sandbox-image-alias", "ubuntu:24.04")
