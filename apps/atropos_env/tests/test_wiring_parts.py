"""The pieces the wiring derives from --env.*: registry names, dataset mapping, pool sizing,
every sandbox backend, toolsets, system-prompt override."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_atropos_env import HermesAtroposEnvConfig
from hermes_atropos_env import wiring as wiring_module
from hermes_atropos_env.cli import prepare
from hermes_atropos_env.config import InferenceConfig
from hermes_atropos_env.wiring import (
    OPTION_NAMES,
    HermesWiring,
    environment_options,
    rollout_spec,
)
from hermes_envs import default_registry
from hermes_protocols import ConfigError, Message
from hermes_rollouts import (
    Credentials,
    RolloutSpec,
    build_environment,
    environment_names,
    parser_names,
    validate,
)
from hermes_sandbox import HostBackend
from hermes_sandbox.factory import build_backend as build_sandbox_backend
from hermes_sandbox.factory import build_toolsets

TOKENS = Credentials(sandbox_token="t0k", nomad_token="acl")


def _spec(env: HermesAtroposEnvConfig, credentials: Credentials = TOKENS) -> RolloutSpec:
    return rollout_spec(env, InferenceConfig(), credentials)


def build_backend(env: HermesAtroposEnvConfig, credentials: Credentials) -> HostBackend:
    spec = _spec(env, credentials)
    validate(spec, OPTION_NAMES)
    return build_sandbox_backend(spec.sandbox)


def test_registry_and_parsers_offer_what_the_docs_name() -> None:
    names = set(environment_names())
    assert {"endless_terminals", "swe_smith_oracle", "terminal_bench"} <= names
    assert "hermes" in parser_names()


def test_terminal_bench_is_reachable_from_the_command_line(tmp_path: Path) -> None:
    out = str(tmp_path / "groups.jsonl")
    argv = ["process", "--env.environment", "terminal_bench"]
    argv += ["--env.data_path_to_save_groups", out, "--env.system_prompt", "Be brief."]
    _command, env, _inference, _notices = prepare(argv, HermesWiring())
    assert env.environment == "terminal_bench"
    environment = build_environment(_spec(env).environment)
    item = next(iter(environment.items(seed=0)))
    assert environment.name == "terminal_bench"
    assert environment.prompt(item)[0] == Message.system("Be brief.")


def test_dataset_fields_map_onto_swe_smith_config(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("")
    base = {"environment": "swe_smith_oracle"}
    assert environment_options(HermesAtroposEnvConfig(**base)) == {}
    assert environment_options(HermesAtroposEnvConfig(**base, dataset_name=str(rows))) == {
        "source": "jsonl",
        "jsonl_path": str(rows),
    }
    hub = HermesAtroposEnvConfig(**base, dataset_name="org/set", dataset_split="test")
    assert environment_options(hub) == {"source": "hf", "hf_dataset": "org/set", "hf_split": "test"}
    default_registry().create(
        "swe_smith_oracle", environment_options(HermesAtroposEnvConfig(**base))
    )


def test_dataset_name_maps_onto_terminal_bench_sources(tmp_path: Path) -> None:
    base = {"environment": "terminal_bench"}
    assert environment_options(HermesAtroposEnvConfig(**base)) == {}
    rows = environment_options(HermesAtroposEnvConfig(**base, dataset_name="tb2.jsonl"))
    assert rows == {"rows_path": "tb2.jsonl", "include_samples": False}
    tasks = environment_options(HermesAtroposEnvConfig(**base, dataset_name=str(tmp_path)))
    assert tasks == {"task_dirs": [str(tmp_path)], "include_samples": False}
    default_registry().config("terminal_bench", tasks)


def test_pool_sizing_follows_the_backend_fields() -> None:
    modal = HermesAtroposEnvConfig(
        tool_pool_mode="modal", modal_slots_per_sandbox=10, modal_min_sandboxes=1
    )
    config = _spec(modal).pool
    assert (config.slots_per_host, config.min_hosts, config.max_hosts) == (10, 1, 8)
    bwrap = _spec(HermesAtroposEnvConfig(slots_per_container=3, max_containers=2)).pool
    assert (bwrap.slots_per_host, bwrap.min_hosts, bwrap.max_hosts) == (3, 0, 2)
    assert bwrap.idle_timeout_s == 3600
    docker = _spec(HermesAtroposEnvConfig(tool_pool_mode="docker", min_containers=2)).pool
    assert (docker.min_hosts, docker.name) == (2, "atropos-endless-terminals")


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({}, "bwrap"),
        ({"tool_pool_mode": "local"}, "local"),
        ({"tool_pool_mode": "docker", "sandbox_image": "python:3.11"}, "docker"),
        ({"tool_pool_mode": "modal", "modal_image": "python:3.11"}, "modal"),
        ({"tool_pool_mode": "remote", "remote_urls": ["http://127.0.0.1:1"]}, "remote"),
        (
            {
                "tool_pool_mode": "nomad",
                "nomad_address": "http://127.0.0.1:4646",
                "sandbox_image": "img",
            },
            "nomad",
        ),
    ],
)
def test_every_pool_mode_builds_its_backend(fields: dict[str, object], kind: str) -> None:
    backend = build_backend(HermesAtroposEnvConfig(**fields), TOKENS)
    assert backend.name == kind


def test_nomad_job_id_and_tokens_reach_the_backend() -> None:
    env = HermesAtroposEnvConfig(
        tool_pool_mode="nomad",
        nomad_address="http://127.0.0.1:4646",
        sandbox_image="img",
        nomad_job_id="rl-pool-7",
    )
    backend = build_backend(env, TOKENS)
    assert backend.job_id(_spec(env).pool.name) == "rl-pool-7"  # type: ignore[attr-defined]
    assert backend.config.token == "acl"  # type: ignore[attr-defined]
    remote = HermesAtroposEnvConfig(tool_pool_mode="remote", remote_urls=["http://127.0.0.1:1"])
    assert build_backend(remote, TOKENS).config.token == "t0k"  # type: ignore[attr-defined]


def test_missing_backend_settings_name_the_adapter_options() -> None:
    remote = HermesAtroposEnvConfig(tool_pool_mode="remote", remote_urls=["http://127.0.0.1:1"])
    with pytest.raises(ConfigError, match=r"\$HERMES_SANDBOX_TOKEN"):
        build_backend(remote, Credentials())
    nomad = HermesAtroposEnvConfig(tool_pool_mode="nomad", nomad_address="http://127.0.0.1:4646")
    with pytest.raises(ConfigError, match=r"--env\.sandbox_image"):
        build_backend(nomad, TOKENS)


def test_credentials_come_from_the_environment_and_stay_out_of_repr() -> None:
    creds = Credentials.from_environ({"HERMES_SANDBOX_TOKEN": "s3", "NOMAD_TOKEN": "n4"})
    assert (creds.sandbox_token, creds.nomad_token) == ("s3", "n4")
    assert "s3" not in repr(creds)
    assert Credentials.from_environ({"HERMES_SANDBOX_TOKEN": ""}).sandbox_token is None


def test_terminal_toolset_uses_terminal_timeout() -> None:
    tools = _spec(HermesAtroposEnvConfig(terminal_timeout=7)).toolsets
    toolsets = {
        ts.name: ts for ts in build_toolsets(tools.command_timeout_s, tools.max_command_timeout_s)
    }
    assert set(toolsets) == {"terminal", "file"}
    (terminal,) = toolsets["terminal"].tools
    assert terminal.default_timeout == 7  # type: ignore[attr-defined]
    assert terminal.max_timeout == 3600  # type: ignore[attr-defined]


def test_extra_body_and_timeout_reach_every_server_type() -> None:
    env = HermesAtroposEnvConfig(extra_body={"top_k": 5}, max_token_length=1024)
    for kind in ("sglang", "vllm", "llama_cpp", "openai"):
        inference = InferenceConfig(
            server_type=kind, base_url="http://h", tokenizer_name="/t", timeout=33, api_key="k"
        )
        model = rollout_spec(env, inference, Credentials()).model
        assert model.extra_body == {"top_k": 5}
        assert model.timeout_s == 33
        assert model.context_tokens == 1024
        assert model.gguf_path is None


def test_embedded_uses_model_path() -> None:
    inference = InferenceConfig(model_path="/m/x.gguf")
    model = rollout_spec(HermesAtroposEnvConfig(), inference, Credentials()).model
    assert (model.server_type, model.gguf_path, model.base_url) == ("embedded", "/m/x.gguf", None)


def test_vllm_without_model_name_names_the_flag() -> None:
    inference = InferenceConfig(
        server_type="vllm", base_url="http://127.0.0.1:9", tokenizer_name="/t", model_name=""
    )
    problems = HermesWiring().problems(HermesAtroposEnvConfig(), inference)
    assert "--openai.server_type vllm needs --openai.model_name (the served model's name)" in (
        problems
    )


def test_the_embedded_model_keeps_one_kv_sequence_per_pool_slot() -> None:
    env = HermesAtroposEnvConfig(slots_per_container=3, max_containers=2)
    assert rollout_spec(env, InferenceConfig(), Credentials()).model.concurrency == 6


def test_environment_options_reach_the_environment_and_bad_ones_name_the_flag() -> None:
    env = HermesAtroposEnvConfig(environment_options={"families": ["write_word"]})
    environment = build_environment(_spec(env).environment)
    assert next(iter(environment.items(seed=0))).id.startswith("write_word-")
    bad = HermesAtroposEnvConfig(environment_options={"families": ["nope"]})
    (problem,) = HermesWiring(TOKENS).problems(bad, InferenceConfig())
    assert problem.startswith("--env.environment_options: ")
    assert "unknown task families ['nope']" in problem


def test_a_lora_adapter_needs_the_embedded_model() -> None:
    argv = ["process", "--env.lora_adapter", "a.gguf", "--openai.server_type", "vllm"]
    argv += ["--openai.base_url", "http://127.0.0.1:1/v1", "--openai.model_name", "m"]
    with pytest.raises(ConfigError, match=r"--env\.lora_adapter needs the embedded model"):
        prepare(argv, HermesWiring())


COUNTING_ENV = """
from pathlib import Path

from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv


def make() -> EndlessTerminalsEnv:
    calls = Path(__file__).with_suffix(".calls")
    calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
    return EndlessTerminalsEnv(EndlessTerminalsConfig())
"""


def test_the_source_gets_the_environment_validation_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere" / "my_env.py"
    path.parent.mkdir()
    path.write_text(COUNTING_ENV)
    argv = ["process", "--env.environment", f"{path}:make"]
    argv += ["--env.data_path_to_save_groups", str(tmp_path / "groups.jsonl")]
    wiring = HermesWiring()
    _command, env, inference, _notices = prepare(argv, wiring)
    assert path.with_suffix(".calls").read_text() == "x"
    opened: list[object] = []
    monkeypatch.setattr(wiring_module, "open_hermes_source", lambda *args: opened.append(args[3]))
    wiring.source_factory(env, inference)
    [environment] = opened
    assert environment is not None
    assert environment.name == "endless_terminals"  # type: ignore[attr-defined]
    assert path.with_suffix(".calls").read_text() == "x"
    assert rollout_spec(env, inference, TOKENS).pool.name == "atropos-make"


def test_image_aliases_reach_the_docker_backend_from_the_command_line() -> None:
    aliases = '{"ubuntu:24.04": "hermes-sandbox-tasks:bookworm-v1"}'
    argv = ["process", "--env.tool_pool_mode", "docker", "--env.sandbox_image_aliases", aliases]
    _, env, _, _ = prepare(argv, HermesWiring(TOKENS))
    names = {k[8:]: v for k, v in OPTION_NAMES.items() if k.startswith("sandbox.")}
    backend = build_sandbox_backend(_spec(env).sandbox, option_names=names)
    assert backend.config.image_aliases == (  # type: ignore[attr-defined]
        ("ubuntu:24.04", "hermes-sandbox-tasks:bookworm-v1"),
    )
    assert backend.config.alias_option == "--env.sandbox_image_aliases"  # type: ignore[attr-defined]
