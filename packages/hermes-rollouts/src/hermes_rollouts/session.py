"""A rollout session: the sandbox pool, the model and the tools of one :class:`RolloutSpec`,
started once and shared by every rollout.

:func:`open_session` validates the spec, starts the pool and proves a host runs a command,
opens the model and proves it answers (see :mod:`hermes_rollouts.preflight`), and builds the
agent loop and the rollout runner once. :meth:`RolloutSession.run_rollout` and
:meth:`RolloutSession.run_group` take the sampling seed explicitly; nothing is rebuilt per
rollout. Everything is released on exit, also on error or cancellation.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

import anyio
import hermes_loop
import hermes_parsers
from hermes_envs import RolloutRunner, RunnerConfig, ToolsetSelection
from hermes_loop import AgentLoop, LoopLimits, ModelHandle
from hermes_protocols import (
    ChatTemplate,
    ConfigError,
    Environment,
    Item,
    SamplingParams,
    SandboxError,
    ScoredRollout,
    Tokenizer,
    ToolCallParser,
    ToolSchema,
    Toolset,
)
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.factory import build_backend, build_toolsets

from hermes_rollouts.option_names import OptionNames
from hermes_rollouts.preflight import (
    check_model,
    check_sandbox,
    check_tools,
    host_start_failed,
)
from hermes_rollouts.spec import RolloutSpec
from hermes_rollouts.validation import validate


def derive_seed(seed: int, key: str) -> int:
    """A reproducible 32-bit seed for ``key`` (a rollout id, a group member) under ``seed``."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def get_parser(name: str, option: str = "parser") -> ToolCallParser:
    """The tool-call parser ``name``; an unknown name lists the known ones under ``option``."""
    try:
        parser: ToolCallParser = hermes_parsers.get_parser(name)
    except (KeyError, ValueError) as exc:
        known = ", ".join(hermes_parsers.list_parsers())
        raise ConfigError(f"unknown {option} {name!r}; known: {known}") from exc
    return parser


class RolloutSession:
    """A started pool + model + tools for one environment; see the module doc."""

    def __init__(
        self,
        spec: RolloutSpec,
        environment: Environment,
        runner: RolloutRunner,
        handle: ModelHandle,
    ) -> None:
        self.spec = spec
        self.environment = environment
        self._runner = runner
        self._handle = handle
        tools = spec.toolsets
        self._selection = ToolsetSelection(
            enabled=tools.enabled, disabled=tools.disabled, distribution=tools.distribution
        )
        self._chosen: dict[int, tuple[Toolset, ...]] = {}

    @property
    def environment_name(self) -> str:
        return self.environment.name

    @property
    def model_name(self) -> str:
        """The model name recorded with every rollout."""
        return self._handle.name

    @property
    def model(self) -> ModelHandle:
        """The loop's model and, where known, its tokenizer and chat template."""
        return self._handle

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self._handle.tokenizer

    @property
    def template(self) -> ChatTemplate | None:
        return self._handle.template

    @property
    def tool_schemas(self) -> list[ToolSchema]:
        """The schemas of every tool the environment allows (what a group may be shown)."""
        allowed = set(self.environment.toolsets)
        return [t.schema for ts in self._runner.toolsets if ts.name in allowed for t in ts.tools]

    def items(self, *, split: str = "train", seed: int = 0) -> Iterator[Item]:
        """The environment's items of ``split``, deterministic for ``seed`` (maybe endless)."""
        return self.environment.items(seed=seed, split=split)

    def toolsets_for(self, seed: int) -> tuple[Toolset, ...]:
        """The toolsets of the group drawn with ``seed`` (deterministic; cached)."""
        found = self._chosen.get(seed)
        if found is None:
            found = self._runner.resolve_toolsets(self._selection, seed=seed)
            self._chosen[seed] = found
        return found

    async def run_rollout(
        self,
        item: Item,
        *,
        seed: int,
        group_index: int = 0,
        toolsets: Sequence[Toolset] | None = None,
    ) -> ScoredRollout:
        """One rollout sampled with ``seed``; with ``toolsets`` omitted, those drawn with
        ``seed``. Never raises for the rollout's own failure (see ``ScoredRollout.failure``)."""
        chosen = self.toolsets_for(seed) if toolsets is None else toolsets
        return await self._runner.run_rollout(item, chosen, group_index=group_index, seed=seed)

    async def run_group(self, item: Item, *, seed: int, group_size: int) -> list[ScoredRollout]:
        """``group_size`` rollouts of ``item`` at once, each in its own slot, sharing the
        toolsets drawn with ``seed``; member ``i`` samples with its own seed derived from
        ``seed``."""
        toolsets = self.toolsets_for(seed)
        results: list[ScoredRollout | None] = [None] * group_size

        async def member(index: int) -> None:
            results[index] = await self.run_rollout(
                item,
                seed=derive_seed(seed, f"{item.id}/{index}"),
                group_index=index,
                toolsets=toolsets,
            )

        async with anyio.create_task_group() as tg:
            for index in range(group_size):
                tg.start_soon(member, index)
        return [r for r in results if r is not None]


def _agent(spec: RolloutSpec, handle: ModelHandle) -> AgentLoop:
    budgets = spec.budgets
    return AgentLoop(
        handle.model,
        sampling=SamplingParams(
            temperature=spec.sampling.temperature, max_tokens=budgets.max_tokens_per_turn
        ),
        limits=LoopLimits(
            max_turns=budgets.max_turns,
            max_tokens_per_turn=budgets.max_tokens_per_turn,
            max_context_tokens=spec.model.context_tokens - 1,
            rollout_timeout_s=budgets.rollout_timeout_s,
            tool_timeout_s=spec.toolsets.command_timeout_s + budgets.tool_timeout_margin_s,
            generation_timeout_s=budgets.generation_timeout_s,
        ),
    )


def _pool_config(spec: RolloutSpec) -> PoolConfig:
    pool = spec.pool
    return PoolConfig(
        name=pool.name,
        slots_per_host=pool.slots_per_host,
        min_hosts=pool.min_hosts,
        max_hosts=pool.max_hosts,
        idle_timeout=pool.idle_timeout_s,
        acquire_timeout=pool.acquire_timeout_s,
    )


#: opens a model the caller builds itself (given the spec's tool-call parser)
ModelOpener = Callable[[ToolCallParser], AbstractAsyncContextManager[ModelHandle]]


@asynccontextmanager
async def open_session(
    spec: RolloutSpec,
    *,
    option_names: Mapping[str, str] | None = None,
    preflight: bool = True,
    model: ModelOpener | None = None,
    environment: Environment | None = None,
) -> AsyncIterator[RolloutSession]:
    """Validate ``spec``, start the pool and the model (each proven to work unless
    ``preflight`` is false) and yield the session; everything is released on exit.
    ``model`` replaces ``spec.model`` with a model the caller opens (a trainer's own sampler);
    ``environment`` is the one :func:`hermes_rollouts.validate` already built from
    ``spec.environment`` (so a start resolves its environment once), else it is built here.

    Raises :class:`~hermes_protocols.ConfigError` listing every problem of the spec,
    :class:`hermes_rollouts.PreflightError` when the sandbox or the model does not work, before
    any rollout starts."""
    environment = validate(spec, option_names, environment=environment)
    names = OptionNames(option_names)
    toolsets = build_toolsets(spec.toolsets.command_timeout_s, spec.toolsets.max_command_timeout_s)
    backend = build_backend(spec.sandbox, option_names=names.section("sandbox"))
    parser = get_parser(spec.parser, names("parser"))
    runner_config = RunnerConfig(
        max_attempts=spec.budgets.max_attempts,
        acquire_timeout=spec.pool.acquire_timeout_s,
        agent_timeout=spec.budgets.agent_phase_timeout_s,
    )
    async with AsyncExitStack() as stack:
        try:
            pool = await stack.enter_async_context(SandboxPool(backend, _pool_config(spec)))
        except SandboxError as exc:  # min_hosts could not start
            raise host_start_failed(exc, spec, names) from exc
        if preflight:
            await check_sandbox(pool, spec, names)
        opened = (
            model(parser)
            if model is not None
            else hermes_loop.open_model(spec.model, parser, option_names=names.section("model"))
        )
        handle = await stack.enter_async_context(opened)
        if preflight:
            await check_model(handle, spec, names)
        runner = RolloutRunner(
            environment, pool, _agent(spec, handle), toolsets, config=runner_config
        )
        session = RolloutSession(spec, runner.env, runner, handle)
        first = session.toolsets_for(0)  # a toolset name that resolves to nothing fails now
        if preflight:
            tools = [tool.schema for toolset in first for tool in toolset.tools]
            await check_tools(handle, tools, spec, names)
        yield session
