"""Config parsing and start-up validation: nonsense fails with a message saying what to change."""

from __future__ import annotations

from pathlib import Path

import pytest
from atroposlib.envs.server_handling.server_manager import ServerManager
from hermes_atropos_env import (
    HermesAtroposEnvConfig,
    InferenceConfig,
    atropos_server_configs,
    config_problems,
    validate_config,
)
from hermes_atropos_env.cli import command_defaults, resolve_wandb, uses_embedded_model
from hermes_atropos_env.cli_args import build_configs, parse_argv
from hermes_atropos_env.credentials import modal_credentials_configured, wandb_key_configured
from hermes_atropos_env.wiring import HermesWiring
from hermes_envs.prefill import load_prefill
from hermes_protocols import ConfigError
from hermes_rollouts import Credentials

WIRING = HermesWiring(Credentials())


def _spec_problems(env: HermesAtroposEnvConfig, inference: InferenceConfig) -> list[str]:
    return WIRING.problems(env, inference)


COMMANDS = ("serve", "process", "evaluate")


def _configs(*argv: str) -> tuple[HermesAtroposEnvConfig, InferenceConfig]:
    parsed = parse_argv(["process", *argv], COMMANDS)
    return build_configs(parsed, command_defaults("process", parsed.env, wandb_available=False))


def _problems(*argv: str, modal: bool = False) -> list[str]:
    env, inference = _configs(*argv)
    return config_problems(
        env, inference, spec_problems=_spec_problems(env, inference), modal_credentials=modal
    )


def test_defaults_are_valid_and_embedded() -> None:
    env, inference = _configs()
    assert _problems() == []
    assert inference.server_type == "embedded"
    assert inference.token_mode
    assert env.tool_pool_mode == "bwrap"
    assert env.use_wandb is False
    assert env.data_path_to_save_groups.endswith(".jsonl")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--env.environment", "nope"], "set --env.environment to one of endless_terminals"),
        (["--env.tool_call_parser", "qwen9"], "set --env.tool_call_parser to one of"),
        (["--env.group_size", "8", "--env.batch_size", "4"], "lower group_size or raise"),
        (["--env.group_size", "3", "--env.batch_size", "8"], "not a multiple of"),
        (["--env.max_tokens_per_turn", "4096"], "must be below --env.max_token_length"),
        (["--env.max_containers", "0"], "--env.max_containers must be 1 or more"),
        (["--env.enabled_toolsets", "terminal", "--env.distribution", "dev"], "mutually"),
        (["--env.tool_pool_mode", "nomad"], "needs --env.nomad_address"),
        (["--env.tool_pool_mode", "nomad"], "needs --env.sandbox_image"),
        (["--env.tool_pool_mode", "remote"], "needs --env.remote_urls"),
        (["--env.tool_pool_mode", "remote"], "$HERMES_SANDBOX_TOKEN"),
        (["--openai.server_type", "vllm"], "needs --openai.base_url"),
        (["--openai.base_url", "http://127.0.0.1:9/v1"], "pick the server's type"),
        (
            ["--openai.server_type", "sglang", "--openai.base_url", "http://127.0.0.1:9"],
            "needs --openai.tokenizer_name",
        ),
    ],
)
def test_nonsense_names_what_to_change(argv: list[str], expected: str) -> None:
    problems = _problems(*argv)
    assert any(expected in p for p in problems), problems


def test_modal_without_credentials_names_them() -> None:
    argv = ["--env.tool_pool_mode", "modal", "--env.modal_image", "python:3.11"]
    assert _problems(*argv, modal=True) == []
    env, inference = _configs(*argv)
    with pytest.raises(ConfigError, match="MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        validate_config(
            env, inference, spec_problems=_spec_problems(env, inference), modal_credentials=False
        )


def test_remote_pool_is_valid_with_urls_and_a_token() -> None:
    env, inference = _configs(
        "--env.tool_pool_mode",
        "remote",
        "--env.remote_urls",
        "http://127.0.0.1:1,http://127.0.0.1:2",
    )
    assert env.remote_urls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert (
        config_problems(
            env,
            inference,
            spec_problems=HermesWiring(Credentials(sandbox_token="t")).problems(env, inference),
            modal_credentials=False,
        )
        == []
    )


def test_parser_only_matters_in_token_mode() -> None:
    argv = ["--openai.server_type", "openai", "--openai.base_url", "http://127.0.0.1:9/v1"]
    argv += ["--openai.tokenizer_name", "/tmp/tok", "--env.tool_call_parser", "unknown"]
    assert _problems(*argv) == []


def test_terminal_backend_is_an_alias_of_tool_pool_mode() -> None:
    env, _ = _configs("--env.terminal_backend", "local")
    assert env.tool_pool_mode == "local"


def test_cli_values_lists_dicts_bools_and_yaml_precedence(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "env:\n  group_size: 4\n  max_agent_turns: 3\n  extra_body: {provider: {order: [a]}}\n"
        "openai:\n  - model_name: from-yaml\n"
    )
    env, inference = _configs(
        "--config",
        str(config),
        "--env.group_size=2",
        "--env.use_wandb",
        "false",
        "--env.enabled_toolsets",
        "terminal,file",
        "--env.include_messages",
    )
    assert env.group_size == 2
    assert env.max_agent_turns == 3
    assert env.extra_body == {"provider": {"order": ["a"]}}
    assert env.enabled_toolsets == ["terminal", "file"]
    assert env.include_messages is True
    assert env.use_wandb is False
    assert inference.model_name == "from-yaml"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--env.group_sise", "2"], "did you mean --env.group_size"),
        (["--openai.base_ur", "x"], "did you mean --openai.base_url"),
        (["--envgroup_size", "2"], "use --env.NAME"),
        (["--env.group_size", "two"], "--env.group_size"),
        (["--openai.server_type", "tgi"], "--openai.server_type"),
        (
            ["--env.enabled_toolsets", '["a'],
            r"^--env.enabled_toolsets: .* \(Unterminated string starting at column 2\)",
        ),
    ],
)
def test_bad_options_fail_with_a_hint(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        _configs(*argv)


def test_unknown_command_is_rejected() -> None:
    with pytest.raises(ConfigError, match="serve, process, evaluate"):
        parse_argv(["train"], COMMANDS)


def test_wandb_is_turned_off_with_a_notice_when_no_key(tmp_path: Path) -> None:
    assert not wandb_key_configured({}, tmp_path)
    assert wandb_key_configured({"WANDB_API_KEY": "k"}, tmp_path)
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password k\n")
    assert wandb_key_configured({}, tmp_path)
    env, _ = _configs("--env.use_wandb", "true")
    notice = resolve_wandb(env, wandb_available=False)
    assert env.use_wandb is False
    assert notice is not None
    assert "wandb login" in notice
    env, _ = _configs("--env.use_wandb", "true")
    assert resolve_wandb(env, wandb_available=True) is None
    assert env.use_wandb is True


def test_modal_credentials_detection(tmp_path: Path) -> None:
    assert not modal_credentials_configured({}, tmp_path)
    assert not modal_credentials_configured({"MODAL_TOKEN_ID": "x"}, tmp_path)
    both = {"MODAL_TOKEN_ID": "x", "MODAL_TOKEN_SECRET": "y"}
    assert modal_credentials_configured(both, tmp_path)
    (tmp_path / ".modal.toml").write_text('[default]\ntoken_id = "a"\ntoken_secret = "b"\n')
    assert modal_credentials_configured({}, tmp_path)


def test_server_configs_are_list_wrapped_and_never_target_port_9004() -> None:
    inference = InferenceConfig(server_type="openai", base_url="http://127.0.0.1:8123/v1")
    configs = atropos_server_configs(inference)
    assert isinstance(configs, list)
    assert len(configs) == 1
    manager = ServerManager(configs)
    urls = [server.config.base_url for server in manager.servers]
    assert urls == ["http://127.0.0.1:8123/v1"]
    # the trap this avoids: a bare config fans out to localhost:9004..9007
    bare = ServerManager(configs[0])
    assert any(":9004" in s.config.base_url for s in bare.servers)


def _serve_configs(*argv: str) -> HermesAtroposEnvConfig:
    parsed = parse_argv(["serve", *argv], COMMANDS)
    embedded = uses_embedded_model(parsed.openai)
    defaults = command_defaults("serve", parsed.env, wandb_available=False, embedded=embedded)
    return build_configs(parsed, defaults)[0]


def test_embedded_serve_defaults_let_the_agent_act_and_deliver_batches() -> None:
    env = _serve_configs()
    assert env.ensure_scores_are_not_same is False  # all-zero groups still reach the trainer
    assert env.enabled_toolsets == ["terminal"]
    assert env.prefill_messages is not None
    assert load_prefill(env.prefill_messages)  # the shipped demonstration
    assert (env.max_agent_turns, env.max_tokens_per_turn) == (4, 160)
    inference = InferenceConfig()
    problems = _spec_problems(env, inference)
    assert config_problems(env, inference, spec_problems=problems, modal_credentials=False) == []


def test_server_defaults_keep_atroposlib_behaviour_and_user_choices_win() -> None:
    served = _serve_configs("--openai.server_type", "vllm", "--openai.base_url", "http://h:1")
    assert served.ensure_scores_are_not_same is True
    assert served.prefill_messages is None
    # the budgets are every app's one default, whatever the model
    assert (served.max_agent_turns, served.max_tokens_per_turn) == (4, 160)
    chosen = _serve_configs("--env.max_agent_turns", "9", "--env.prefill_messages", "none")
    assert (chosen.max_agent_turns, chosen.prefill_messages) == (9, None)  # none = off


def test_bad_prefill_file_is_a_config_problem(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text('[{"role": "system", "content": "x"}]', encoding="utf-8")
    (problem,) = _problems("--env.prefill_messages", str(bad))
    assert problem.startswith("--env.prefill_messages: prefill")
    assert "system prompt comes from the environment" in problem
