"""Start-up checks: a configuration that makes no sense fails at once, saying what to change.

The rollout spec's problems (environment, parser, toolsets, budgets, model, sandbox) come from
:func:`hermes_rollouts.spec_problems`; this module adds the adapter's own (Atropos batching,
the terminal's lifetime, Modal credentials, phase 1's tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.errors import ConfigError

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig


def config_problems(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    *,
    spec_problems: Sequence[str],
    modal_credentials: bool,
) -> list[str]:
    """Every problem of the configuration, each phrased as what to change: the rollout spec's
    (``spec_problems``) and the adapter's own. ``modal_credentials``: whether Modal
    credentials are available (checked for modal pools)."""
    problems = list(spec_problems)
    if env.group_size < 1:
        problems.append(f"--env.group_size is {env.group_size}: use 1 or more")
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
    if env.max_items is not None and env.max_items < 1:
        problems.append(f"--env.max_items is {env.max_items}: use 1 or more, or leave it unset")
    if env.terminal_lifetime <= env.terminal_timeout:
        problems.append(
            f"--env.terminal_lifetime ({env.terminal_lifetime}s) must exceed "
            f"--env.terminal_timeout ({env.terminal_timeout}s)"
        )
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
    if inference.server_type == "openai" and not inference.tokenizer_name:
        problems.append(
            "--openai.server_type openai needs --openai.tokenizer_name: the served model's HF "
            "tokenizer (a local directory), used to rebuild token ids and masks for the trainer"
        )
    if env.lora_adapter and inference.server_type != "embedded":
        problems.append(
            "--env.lora_adapter needs the embedded model (--openai.server_type embedded): "
            "adapters are loaded into it between groups"
        )
    if inference.timeout <= 0:
        problems.append("--openai.timeout must be positive (seconds)")
    return problems


def validate_config(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    *,
    spec_problems: Sequence[str],
    modal_credentials: bool,
) -> None:
    """Raise one :class:`ConfigError` listing every problem, or return if the config is usable."""
    problems = config_problems(
        env, inference, spec_problems=spec_problems, modal_credentials=modal_credentials
    )
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
