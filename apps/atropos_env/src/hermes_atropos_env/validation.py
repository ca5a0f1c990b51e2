"""Start-up checks: a configuration that makes no sense fails at once, saying what to change."""

from __future__ import annotations

from collections.abc import Collection

import attrs
from hermes_envs import DatasetError
from hermes_envs.prefill import load_prefill
from hermes_protocols.errors import ConfigError

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig


@attrs.frozen(slots=True)
class KnownNames:
    """What the wired packages offer: registered environments and tool-call parsers."""

    environments: Collection[str]
    parsers: Collection[str]


def _choices(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) or "(none registered)"


def config_problems(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    *,
    known: KnownNames,
    modal_credentials: bool,
    sandbox_token: bool = False,
) -> list[str]:
    """Every problem of the configuration, each phrased as what to change.

    ``modal_credentials``/``sandbox_token``: whether Modal credentials and
    ``$HERMES_SANDBOX_TOKEN`` are available (checked only for the modal/remote pools)."""
    problems: list[str] = []
    if env.environment not in known.environments:
        problems.append(
            f"unknown environment {env.environment!r}: set --env.environment to one of "
            f"{_choices(known.environments)}"
        )
    if inference.token_mode and env.tool_call_parser not in known.parsers:
        problems.append(
            f"unknown tool-call parser {env.tool_call_parser!r}: set --env.tool_call_parser "
            f"to one of {_choices(known.parsers)}"
        )
    if env.group_size < 1:
        problems.append(f"--env.group_size is {env.group_size}: use 1 or more")
    if env.prefill_messages and env.prefill_messages != "none":
        try:
            load_prefill(env.prefill_messages)
        except DatasetError as exc:
            problems.append(f"--env.prefill_messages: {exc}")
    if env.batch_size != -1:
        if env.group_size > env.batch_size:
            problems.append(
                f"--env.group_size ({env.group_size}) is above --env.batch_size "
                f"({env.batch_size}): lower group_size or raise batch_size"
            )
        elif env.batch_size % env.group_size != 0:
            problems.append(
                f"--env.batch_size ({env.batch_size}) is not a multiple of --env.group_size "
                f"({env.group_size}): Atropos only fills whole groups into a batch"
            )
    if env.enabled_toolsets and env.distribution:
        problems.append(
            "--env.enabled_toolsets and --env.distribution are mutually exclusive: set one"
        )
    if env.max_agent_turns < 1:
        problems.append(f"--env.max_agent_turns is {env.max_agent_turns}: use 1 or more")
    if env.max_tokens_per_turn < 1:
        problems.append(f"--env.max_tokens_per_turn is {env.max_tokens_per_turn}: use 1 or more")
    if env.max_tokens_per_turn >= env.max_token_length:
        problems.append(
            f"--env.max_tokens_per_turn ({env.max_tokens_per_turn}) must be below "
            f"--env.max_token_length ({env.max_token_length}), the whole-sequence budget"
        )
    if env.max_items is not None and env.max_items < 1:
        problems.append(f"--env.max_items is {env.max_items}: use 1 or more, or leave it unset")
    if env.terminal_timeout <= 0:
        problems.append("--env.terminal_timeout must be positive (seconds)")
    if env.terminal_lifetime <= env.terminal_timeout:
        problems.append(
            f"--env.terminal_lifetime ({env.terminal_lifetime}s) must exceed "
            f"--env.terminal_timeout ({env.terminal_timeout}s)"
        )
    problems.extend(
        _pool_problems(env, modal_credentials=modal_credentials, sandbox_token=sandbox_token)
    )
    problems.extend(_inference_problems(inference))
    return problems


def _pool_problems(
    env: HermesAtroposEnvConfig, *, modal_credentials: bool, sandbox_token: bool
) -> list[str]:
    problems: list[str] = []
    if env.tool_pool_mode == "modal":
        if not modal_credentials:
            problems.append(
                "--env.tool_pool_mode modal needs Modal credentials: set MODAL_TOKEN_ID and "
                "MODAL_TOKEN_SECRET (or run `modal token new` to write ~/.modal.toml), or use "
                "--env.tool_pool_mode bwrap"
            )
        if not env.modal_image:
            problems.append("--env.tool_pool_mode modal needs --env.modal_image (e.g. python:3.11)")
        if env.modal_min_sandboxes > env.modal_max_sandboxes:
            problems.append("--env.modal_min_sandboxes is above --env.modal_max_sandboxes")
        if env.modal_slots_per_sandbox < 1:
            problems.append("--env.modal_slots_per_sandbox must be 1 or more")
    if env.tool_pool_mode == "nomad":
        if not env.nomad_address:
            problems.append(
                "--env.tool_pool_mode nomad needs --env.nomad_address (http://host:4646)"
            )
        if not env.sandbox_image:
            problems.append(
                "--env.tool_pool_mode nomad needs --env.sandbox_image (an image with "
                "hermes-sandbox and bubblewrap)"
            )
    if env.tool_pool_mode == "remote":
        if not env.remote_urls:
            problems.append(
                "--env.tool_pool_mode remote needs --env.remote_urls (sandbox server URLs)"
            )
        if not sandbox_token:
            problems.append(
                "--env.tool_pool_mode remote needs the servers' bearer token in "
                "$HERMES_SANDBOX_TOKEN"
            )
    if env.tool_pool_mode in ("docker", "nomad", "remote"):
        if env.min_containers > env.max_containers:
            problems.append("--env.min_containers is above --env.max_containers")
        if env.slots_per_container < 1:
            problems.append("--env.slots_per_container must be 1 or more")
    return problems


def _inference_problems(inference: InferenceConfig) -> list[str]:
    problems: list[str] = []
    if inference.server_type != "embedded" and not inference.base_url:
        problems.append(
            f"--openai.server_type {inference.server_type} needs --openai.base_url; leave "
            "both unset to use the embedded model"
        )
    if inference.server_type == "embedded" and inference.base_url:
        problems.append(
            "--openai.base_url is set but --openai.server_type is embedded: pick the server's "
            "type (openai, sglang, vllm, llama_cpp) or drop base_url"
        )
    if inference.server_type != "embedded" and not inference.tokenizer_name:
        problems.append(
            f"--openai.server_type {inference.server_type} needs --openai.tokenizer_name: the "
            "served model's HF tokenizer (a local directory), used for token ids and masks"
        )
    if inference.timeout <= 0:
        problems.append("--openai.timeout must be positive (seconds)")
    return problems


def validate_config(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    *,
    known: KnownNames,
    modal_credentials: bool,
    sandbox_token: bool = False,
) -> None:
    """Raise :class:`ConfigError` listing every problem, or return if the config is usable."""
    problems = config_problems(
        env,
        inference,
        known=known,
        modal_credentials=modal_credentials,
        sandbox_token=sandbox_token,
    )
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
