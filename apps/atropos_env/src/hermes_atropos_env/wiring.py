"""The adapter's ``--env.*``/``--openai.*`` options as a :class:`hermes_rollouts.RolloutSpec`,
and a started session as the :class:`~hermes_atropos_env.source.RolloutSource` the Atropos
environment rolls groups from.

This is the one place the adapter's options meet the packages: a new package option (the
embedded model's concurrency, a token server's logprob mode) is mapped in :func:`rollout_spec`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from hermes_protocols import (
    AgentResult,
    ConfigError,
    Environment,
    Item,
    ScoredRollout,
    TokenTrace,
)
from hermes_rollouts import (
    DEFAULT_NOMAD_JOB_PREFIX,
    AdapterFile,
    Credentials,
    RolloutSession,
    check_spec,
    hf_tokenizer_dir,
    open_session,
    reference_slug,
)
from hermes_rollouts import spec as specs

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.retokenize import ChatTemplateRetokenizer
from hermes_atropos_env.source import RolloutSource, RolloutSourceFactory

#: spec paths -> the adapter's options, for every error message
OPTION_NAMES = {
    "environment.name": "--env.environment",
    "environment.options": "--env.environment_options",
    "environment.prefill_messages": "--env.prefill_messages",
    "toolsets.enabled": "--env.enabled_toolsets",
    "toolsets.disabled": "--env.disabled_toolsets",
    "toolsets.distribution": "--env.distribution",
    "toolsets.command_timeout_s": "--env.terminal_timeout",
    "budgets.max_turns": "--env.max_agent_turns",
    "budgets.max_tokens_per_turn": "--env.max_tokens_per_turn",
    "budgets.generation_timeout_s": "--openai.timeout",
    "sampling.temperature": "--env.agent_temperature",
    "parser": "--env.tool_call_parser",
    "model.server_type": "--openai.server_type",
    "model.base_url": "--openai.base_url",
    "model.model": "--openai.model_name",
    "model.tokenizer": "--openai.tokenizer_name",
    "model.end_token_ids": "--openai.end_token_ids",
    "model.server_logprob_mode": "--openai.server_logprob_mode",
    "model.parse_content_tool_calls": "--openai.parse_content_tool_calls",
    "model.gguf_path": "--openai.model_path",
    "model.timeout_s": "--openai.timeout",
    "model.context_tokens": "--env.max_token_length",
    "sandbox.kind": "--env.tool_pool_mode",
    "sandbox.image": "--env.sandbox_image",
    "sandbox.image_aliases": "--env.sandbox_image_aliases",
    "sandbox.urls": "--env.remote_urls",
    "sandbox.token": "$HERMES_SANDBOX_TOKEN",
    "sandbox.nomad_address": "--env.nomad_address",
    "sandbox.ray_address": "--env.ray_address",
    "pool.slots_per_host": "--env.slots_per_container",
    "pool.min_hosts": "--env.min_containers",
    "pool.max_hosts": "--env.max_containers",
}


def environment_options(env: HermesAtroposEnvConfig) -> dict[str, Any]:
    """Environment config values derived from ``--env.dataset_*`` (empty = its defaults),
    under ``--env.environment_options``.

    ``swe_smith_oracle``: a ``.jsonl`` path reads that file, any other name is a Hub dataset
    (with ``dataset_split``); unset uses the shipped offline fixtures. ``terminal_bench``: a
    ``.jsonl`` file of TB2 rows or a task directory, instead of the shipped sample tasks.
    """
    options: dict[str, Any] = {}
    if env.environment == "terminal_bench" and env.dataset_name:
        if Path(env.dataset_name).is_dir():
            options.update(task_dirs=[env.dataset_name], include_samples=False)
        else:
            options.update(rows_path=env.dataset_name, include_samples=False)
    if env.environment == "swe_smith_oracle" and env.dataset_name:
        if env.dataset_name.endswith(".jsonl") or Path(env.dataset_name).is_file():
            options.update(source="jsonl", jsonl_path=env.dataset_name)
        else:
            options.update(source="hf", hf_dataset=env.dataset_name, hf_split=env.dataset_split)
    return {**options, **(env.environment_options or {})}


def _pool_spec(env: HermesAtroposEnvConfig) -> specs.PoolSpec:
    """Modal uses the modal_* fields, other backends the *_containers fields; the pool is
    ``--env.nomad_job_id`` on nomad, else ``atropos-<environment>``."""
    mode = env.tool_pool_mode
    if mode == "modal":
        slots, low, high = (
            env.modal_slots_per_sandbox,
            env.modal_min_sandboxes,
            env.modal_max_sandboxes,
        )
    else:
        slots, low, high = env.slots_per_container, 0, env.max_containers
        if mode in ("docker", "nomad", "remote"):
            low = env.min_containers
    name = env.nomad_job_id if mode == "nomad" and env.nomad_job_id else None
    return specs.PoolSpec(
        name=name or f"atropos-{reference_slug(env.environment)}".replace("_", "-"),
        slots_per_host=slots,
        min_hosts=low,
        max_hosts=high,
        idle_timeout_s=float(env.terminal_lifetime),
        acquire_timeout_s=max(120.0, float(env.terminal_timeout)),
    )


def model_spec(env: HermesAtroposEnvConfig, inference: InferenceConfig) -> specs.ModelSpec:
    """The ``--openai.*`` options (with the context and concurrency ``env`` implies)."""
    embedded = inference.server_type == "embedded"
    return specs.ModelSpec(
        server_type=inference.server_type,
        base_url=inference.base_url or None,
        model=inference.model_name or None,
        api_key=inference.api_key or None,
        tokenizer=inference.tokenizer_name or None,
        extra_body=env.extra_body,
        timeout_s=inference.timeout,
        context_tokens=env.max_token_length,
        gguf_path=(inference.model_path or None) if embedded else None,
        end_token_ids=inference.end_token_ids or None,
        server_logprob_mode=inference.server_logprob_mode,
        parse_content_tool_calls=inference.parse_content_tool_calls,
        concurrency=max(1, _pool_spec(env).capacity),  # the embedded model: a KV sequence per slot
        # (at least 1, so that a pool of 0 slots is reported by its own option, not here)
    )


def rollout_spec(
    env: HermesAtroposEnvConfig, inference: InferenceConfig, credentials: Credentials
) -> specs.RolloutSpec:
    """The adapter's options (and the sandbox credentials) as the assembly's spec."""
    modal = env.tool_pool_mode == "modal"
    return specs.RolloutSpec(
        model=model_spec(env, inference),
        sandbox=specs.SandboxSpec(
            kind=env.tool_pool_mode,
            image=env.modal_image if modal else env.sandbox_image,
            image_aliases=env.sandbox_image_aliases or {},
            urls=tuple(env.remote_urls or ()),
            token=credentials.sandbox_token,
            nomad_address=env.nomad_address,
            nomad_token=credentials.nomad_token,
            ray_address=env.ray_address,
            ray_python=env.ray_python,
            # --env.nomad_job_id is the whole job id: it becomes the pool name, without prefix
            nomad_job_prefix="" if env.nomad_job_id else DEFAULT_NOMAD_JOB_PREFIX,
            cpu=env.modal_cpu,
            memory_mb=env.modal_memory,
            gpu=env.modal_gpu,
            secrets=tuple(env.modal_secrets or ()),
            idle_timeout_s=float(env.terminal_lifetime),
        ),
        pool=_pool_spec(env),
        environment=specs.EnvironmentSpec(
            name=env.environment,
            options=environment_options(env),
            system_prompt=env.system_prompt,
            prefill_messages=None if env.prefill_messages == "none" else env.prefill_messages,
        ),
        toolsets=specs.ToolsetSpec(
            enabled=env.enabled_toolsets,
            disabled=env.disabled_toolsets or (),
            distribution=env.distribution,
            command_timeout_s=float(env.terminal_timeout),
            max_command_timeout_s=float(env.terminal_lifetime),
        ),
        budgets=specs.AgentBudgets(
            max_turns=env.max_agent_turns,
            max_tokens_per_turn=env.max_tokens_per_turn,
            generation_timeout_s=inference.timeout,
            agent_phase_timeout_s=float(env.terminal_lifetime),
        ),
        sampling=specs.SamplingSpec(temperature=env.agent_temperature),
        parser=env.tool_call_parser,
    )


class SessionSource:
    """Groups from a started session: group ``k`` uses seed ``--env.seed + k`` for its
    toolsets and, derived per member, for sampling; with an :class:`AdapterFile`, the model
    follows it."""

    def __init__(
        self,
        session: RolloutSession,
        retokenizer: ChatTemplateRetokenizer,
        seed: int,
        adapter: AdapterFile | None = None,
    ) -> None:
        self._session = session
        self._retokenizer = retokenizer
        self._group_seeds = itertools.count(seed)
        self._adapter = adapter

    async def sync_weights(self) -> str | None:
        return None if self._adapter is None else await self._adapter.sync()

    @property
    def environment_name(self) -> str:
        return self._session.environment_name

    def items(self, *, split: str, seed: int) -> Iterator[Item]:
        return self._session.items(split=split, seed=seed)

    async def run_group(self, item: Item, group_size: int) -> Sequence[ScoredRollout]:
        return await self._session.run_group(
            item, seed=next(self._group_seeds), group_size=group_size
        )

    def retokenize(self, result: AgentResult) -> TokenTrace:
        return self._retokenizer(result)


@asynccontextmanager
async def open_hermes_source(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    credentials: Credentials | None = None,
    environment: Environment | None = None,
) -> AsyncIterator[RolloutSource]:
    """Start pool and model for ``env``/``inference`` (with ``environment``: the one already
    built from them); everything is released on exit."""
    spec = rollout_spec(env, inference, credentials or Credentials())
    async with open_session(spec, option_names=OPTION_NAMES, environment=environment) as session:
        tokenizer, template = session.tokenizer, session.template
        assert tokenizer is not None  # token mode, or --openai.tokenizer_name (validated)
        assert template is not None
        retokenizer = ChatTemplateRetokenizer(tokenizer, template, session.tool_schemas)
        load = session.model.load_lora
        adapter = None
        if env.lora_adapter:
            if load is None:
                raise ConfigError("--env.lora_adapter needs the embedded model")
            adapter = AdapterFile(Path(env.lora_adapter), load)
        yield SessionSource(session, retokenizer, env.seed, adapter)


class HermesWiring:
    """The CLI's view of the assembly: the spec's problems, the tokenizer directory, the
    source factory; ``credentials`` are the sandbox tokens. The environment :meth:`problems`
    built is the one the source uses (a start resolves it once)."""

    def __init__(self, credentials: Credentials | None = None) -> None:
        self._credentials = credentials or Credentials()
        self._built: tuple[specs.EnvironmentSpec, Environment] | None = None

    def problems(self, env: HermesAtroposEnvConfig, inference: InferenceConfig) -> list[str]:
        spec = rollout_spec(env, inference, self._credentials)
        check = check_spec(spec, OPTION_NAMES)
        if check.environment is not None:
            self._built = (spec.environment, check.environment)
        return list(check.problems)

    def _environment(self, env: HermesAtroposEnvConfig) -> Environment | None:
        """The environment :meth:`problems` built for these options, if it did."""
        if self._built is None:
            return None
        spec, environment = self._built
        wanted = rollout_spec(env, InferenceConfig(), self._credentials).environment
        return environment if wanted == spec else None

    def tokenizer_dir(self, env: HermesAtroposEnvConfig, inference: InferenceConfig) -> str:
        return str(hf_tokenizer_dir(model_spec(env, inference)) or "")

    @property
    def source_factory(self) -> RolloutSourceFactory:
        def factory(
            env: HermesAtroposEnvConfig, inference: InferenceConfig
        ) -> AbstractAsyncContextManager[RolloutSource]:
            return open_hermes_source(env, inference, self._credentials, self._environment(env))

        return factory
