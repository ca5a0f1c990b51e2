"""The real :class:`~hermes_atropos_env.source.RolloutSource`: hermes-envs environment and
rollout runner, hermes-sandbox pool and tools, hermes-loop agent loop and model, hermes-parsers.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from hermes_envs import (
    RolloutRunner,
    RunnerConfig,
    ToolsetSelection,
    default_registry,
    with_system_prompt,
)
from hermes_envs.prefill import load_prefill, with_prefill
from hermes_loop import AgentLoop, LoopLimits
from hermes_protocols import (
    Environment,
    Item,
    Message,
    SamplingParams,
    ScoredRollout,
    TokenTrace,
)
from hermes_sandbox import SlotPool

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.credentials import SandboxCredentials
from hermes_atropos_env.inference import ModelParts, embedded_tokenizer_dir, open_model
from hermes_atropos_env.registry import environment_options, parser_names
from hermes_atropos_env.retokenize import ChatTemplateRetokenizer
from hermes_atropos_env.sandboxes import (
    TOOL_TIMEOUT_MARGIN_S,
    build_backend,
    build_toolsets,
    pool_config,
)
from hermes_atropos_env.source import RolloutSource, RolloutSourceFactory
from hermes_atropos_env.validation import KnownNames


class HermesRolloutSource:
    """Groups rolled out by the hermes-envs runner; toolsets resolved once per group."""

    def __init__(
        self,
        environment: Environment,
        runner: RolloutRunner,
        selection: ToolsetSelection,
        retokenizer: ChatTemplateRetokenizer,
        seed: int,
    ) -> None:
        self._environment = environment
        self._runner = runner
        self._selection = selection
        self._retokenizer = retokenizer
        self._group_seeds = itertools.count(seed)

    @property
    def environment_name(self) -> str:
        return self._environment.name

    def items(self, *, split: str, seed: int) -> Iterator[Item]:
        return self._environment.items(seed=seed, split=split)

    async def run_group(self, item: Item, group_size: int) -> Sequence[ScoredRollout]:
        return await self._runner.run_group(
            item, selection=self._selection, seed=next(self._group_seeds), group_size=group_size
        )

    def retokenize(self, messages: Sequence[Message]) -> TokenTrace:
        return self._retokenizer(messages)


def _agent(
    env: HermesAtroposEnvConfig, parts: ModelParts, generation_timeout_s: float
) -> AgentLoop:
    return AgentLoop(
        parts.model,
        # no sampling seed: the members of a group must sample independently
        sampling=SamplingParams(
            temperature=env.agent_temperature, max_tokens=env.max_tokens_per_turn
        ),
        limits=LoopLimits(
            max_turns=env.max_agent_turns,
            max_tokens_per_turn=env.max_tokens_per_turn,
            max_context_tokens=env.max_token_length - 1,
            tool_timeout_s=env.terminal_timeout + TOOL_TIMEOUT_MARGIN_S,
            generation_timeout_s=generation_timeout_s,
        ),
    )


@asynccontextmanager
async def open_hermes_source(
    env: HermesAtroposEnvConfig,
    inference: InferenceConfig,
    credentials: SandboxCredentials | None = None,
) -> AsyncIterator[RolloutSource]:
    """Start pool and model for ``env``/``inference``; everything is released on exit."""
    environment = with_system_prompt(
        default_registry().create(env.environment, environment_options(env)), env.system_prompt
    )
    if env.prefill_messages and env.prefill_messages != "none":
        environment = with_prefill(environment, load_prefill(env.prefill_messages))
    toolsets = build_toolsets(env)
    selection = ToolsetSelection(
        enabled=env.enabled_toolsets,
        disabled=env.disabled_toolsets or (),
        distribution=env.distribution,
    )
    tools = [t.schema for ts in toolsets if ts.name in environment.toolsets for t in ts.tools]
    runner_config = RunnerConfig(
        group_size=env.group_size,
        agent_timeout=float(env.terminal_lifetime),
    )
    async with (
        SlotPool(build_backend(env, credentials or SandboxCredentials()), pool_config(env)) as pool,
        open_model(env, inference) as parts,
    ):
        runner = RolloutRunner(
            environment, pool, _agent(env, parts, inference.timeout), toolsets, config=runner_config
        )
        retokenizer = ChatTemplateRetokenizer(parts.tokenizer, parts.template, tools)
        yield HermesRolloutSource(environment, runner, selection, retokenizer, env.seed)


class HermesWiring:
    """The CLI's view of the wired packages (names to validate, tokenizer, source factory);
    ``credentials`` are the sandbox tokens (see :class:`SandboxCredentials.from_environ`)."""

    def __init__(self, credentials: SandboxCredentials | None = None) -> None:
        self._credentials = credentials or SandboxCredentials()

    def known_names(self) -> KnownNames:
        return KnownNames(environments=default_registry().names(), parsers=parser_names())

    def tokenizer_dir(self, inference: InferenceConfig) -> str:
        if inference.server_type == "embedded":
            return embedded_tokenizer_dir(inference)
        return inference.tokenizer_name

    @property
    def source_factory(self) -> RolloutSourceFactory:
        def factory(
            env: HermesAtroposEnvConfig, inference: InferenceConfig
        ) -> AbstractAsyncContextManager[RolloutSource]:
            return open_hermes_source(env, inference, self._credentials)

        return factory
