"""The batch runner's options as a :class:`hermes_rollouts.RolloutSpec`, and the session's
rollouts as :class:`~hermes_batch_runner.components.Components`.

This is the one place the runner's flags meet the packages: a new package option (a model's
batch size, a token server's logprob mode) is mapped in :func:`rollout_spec`.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from hermes_protocols import Environment, Item, ScoredRollout
from hermes_rollouts import (
    Credentials,
    RolloutSession,
    derive_seed,
    hf_tokenizer_dir,
    open_session,
    rollout_id,
)
from hermes_rollouts import spec as specs

from hermes_batch_runner.config import RunConfig

#: seconds the runner's agent phase adds to --rollout-timeout (the loop stops itself first)
AGENT_PHASE_MARGIN_S = 60.0

#: spec paths -> this CLI's options, for every error message
OPTION_NAMES = {
    "environment.name": "--env",
    "environment.options": "--env-options",
    "environment.dataset": "--dataset",
    "environment.prefill_messages": "--prefill-messages",
    "toolsets.enabled": "--toolsets",
    "toolsets.disabled": "--disabled-toolsets",
    "toolsets.distribution": "--distribution",
    "toolsets.command_timeout_s": "--command-timeout",
    "budgets.max_turns": "--max-turns",
    "budgets.max_tokens_per_turn": "--max-tokens",
    "budgets.rollout_timeout_s": "--rollout-timeout",
    "sampling.temperature": "--temperature",
    "parser": "--parser",
    "model.server_type": "--server-type",
    "model.base_url": "--model-url",
    "model.model": "--model",
    "model.gguf_path": "--model",
    "model.tokenizer": "--tokenizer",
    "model.end_token_ids": "--end-token-ids",
    "model.server_logprob_mode": "--server-logprob-mode",
    "model.parse_content_tool_calls": "--parse-tool-calls-from-content",
    "model.context_tokens": "--context-tokens",
    "model.concurrency": "--concurrency",
    "model.threads": "--threads",
    "model.timeout_s": "--rollout-timeout",
    "sandbox.kind": "--sandbox",
    "sandbox.image": "--sandbox-image",
    "sandbox.image_aliases": "--sandbox-image-alias NAME=IMAGE",
    "sandbox.urls": "--sandbox-url",
    "sandbox.token": "--sandbox-token or $HERMES_SANDBOX_TOKEN",
    "sandbox.nomad_address": "--nomad-address",
    "sandbox.ray_address": "--ray-address",
    "pool.slots_per_host": "--sandbox-slots",
    "pool.max_hosts": "--sandbox-max-hosts",
}


def pool_name(run_key: str) -> str:
    """A pool name unique to the run directory (so a resumed run sweeps its own orphans)."""
    digest = hashlib.sha256(str(Path(run_key).resolve()).encode()).hexdigest()[:10]
    return f"batch-{digest}"


def rollout_spec(config: RunConfig, credentials: Credentials) -> specs.RolloutSpec:
    """The run's options (and credentials) as the assembly's spec."""
    embedded = config.server_type == "embedded"
    return specs.RolloutSpec(
        model=specs.ModelSpec(
            server_type=config.server_type,
            base_url=config.model_url,
            model=None if embedded else config.model,
            api_key=credentials.api_key,
            tokenizer=config.tokenizer,
            extra_body=config.extra_body,
            timeout_s=config.rollout_timeout,
            context_tokens=config.context_tokens,
            gguf_path=config.model if embedded else None,
            end_token_ids=config.end_token_ids,
            server_logprob_mode=config.server_logprob_mode,
            parse_content_tool_calls=config.parse_content_tool_calls,
            concurrency=config.in_flight,
            threads=config.threads,
        ),
        sandbox=specs.SandboxSpec(
            kind=config.sandbox,
            image=config.sandbox_image,
            image_aliases=[
                (a.partition("=")[0], a.partition("=")[2]) for a in config.sandbox_image_alias
            ],
            allow_network=config.sandbox_allow_network,
            urls=config.sandbox_url,
            token=credentials.sandbox_token,
            nomad_address=config.nomad_address,
            nomad_token=credentials.nomad_token,
            ray_address=config.ray_address,
            ray_python=config.ray_python,
            rollout_timeout_s=config.rollout_timeout,
        ),
        pool=specs.PoolSpec(
            name=pool_name(config.output or "default"),
            slots_per_host=config.sandbox_slots,
            max_hosts=config.sandbox_max_hosts,
            acquire_timeout_s=max(120.0, config.rollout_timeout),
        ),
        environment=specs.EnvironmentSpec(
            name=config.env,
            options=dict(config.env_options or {}),
            dataset=config.dataset,
            skip_bad_lines=config.on_bad_line == "skip",
            system_prompt=config.system_prompt,
            prefill_messages=config.prefill_file,
        ),
        toolsets=specs.ToolsetSpec(
            enabled=config.enabled_toolsets,
            disabled=config.disabled_toolsets,
            distribution=config.distribution,
            command_timeout_s=config.command_timeout,
        ),
        budgets=specs.AgentBudgets(
            max_turns=config.max_turns,
            max_tokens_per_turn=config.max_tokens,
            rollout_timeout_s=config.rollout_timeout,
            agent_phase_timeout_s=config.rollout_timeout + AGENT_PHASE_MARGIN_S,
        ),
        sampling=specs.SamplingSpec(temperature=config.temperature),
        parser=config.parser,
    )


class SessionComponents:
    """The run's items and rollouts from a started session: rollout ``r`` samples with a seed
    derived from ``--seed`` and its record id; item ``k``'s group draws its toolsets with
    ``--seed + k``."""

    def __init__(self, config: RunConfig, session: RolloutSession) -> None:
        self._config = config
        self._seed = config.seed
        self.session = session
        items = session.items(seed=config.seed)
        limit = config.item_limit
        self._items = tuple(items if limit is None else itertools.islice(items, limit))

    @property
    def env_name(self) -> str:
        return self.session.environment_name

    @property
    def items(self) -> Sequence[Item]:
        return self._items

    @property
    def model(self) -> str:
        return self.session.model_name

    async def save_tokenizer(self, target: Path) -> bool:
        """Copy the model's ``tokenizer.json`` (the embedded model's export, or
        ``--tokenizer``) to ``target``, so the report shows token text; ``False`` when there
        is none."""
        directory = await anyio.to_thread.run_sync(hf_tokenizer_dir, self.session.spec.model)
        source = directory / "tokenizer.json" if directory is not None else None
        if source is None or not source.is_file():
            return False
        await anyio.to_thread.run_sync(shutil.copyfile, source, target)
        return True

    async def run_one(self, item: Item, item_index: int, group_index: int) -> ScoredRollout:
        record_id = rollout_id(self.env_name, item.id, group_index)
        return await self.session.run_rollout(
            item,
            seed=derive_seed(self._seed, record_id),
            group_index=group_index,
            toolsets=self.session.toolsets_for(self._seed + item_index),
        )


@asynccontextmanager
async def real_components(
    config: RunConfig, *, credentials: Credentials, environment: Environment | None = None
) -> AsyncIterator[SessionComponents]:
    """Open the session of ``config`` (with ``environment``: the one the command line already
    resolved from it); the pool and the model are released on exit."""
    spec = rollout_spec(config, credentials)
    async with open_session(spec, option_names=OPTION_NAMES, environment=environment) as session:
        yield SessionComponents(config, session)
