"""Episodes driven from outside: for a trainer that owns the model and the tool loop (TRL's
``environment_factory``) and calls our tools one by one. Each episode is one rollout of the
runner (a slot acquired, ``setup_workspace``, the tools bound to that slot, ``verify`` on the
same slot, the slot released on every exit path) whose agent is a bridge: it hands the slot's
tool executor to the driver and waits until the driver finishes the episode.

:class:`EpisodeHost` is the async side (sandbox pool, environment and toolsets of one spec, no
model). :class:`BlockingEpisodes` runs a host on an event loop thread of its own for a
synchronous driver; each call waits with a timeout, and closing it cancels and releases every
episode still open.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from functools import partial
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hermes_envs import RolloutRunner, RunnerConfig, ToolsetSelection
from hermes_protocols import (
    AgentResult,
    Environment,
    Item,
    Message,
    ScoredRollout,
    SlotPool,
    StopReason,
    ToolCall,
    ToolExecutor,
    ToolSchema,
    Toolset,
)
from hermes_sandbox import SandboxPool
from hermes_sandbox.factory import build_backend, build_toolsets

from hermes_rollouts.session import _pool_config
from hermes_rollouts.single_rollout import RolloutOutcome
from hermes_rollouts.spec import RolloutSpec
from hermes_rollouts.validation import validate


class _Bridge:
    """The agent of one episode: gives the driver the slot's executor, then waits for it."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.finished = anyio.Event()
        self.scope = anyio.CancelScope()  # cancelled by an abort
        self.done = anyio.Event()  # the rollout returned (its slot released) or was aborted
        self.began = False  # its rollout task is running (set on the event loop)
        self.executor: ToolExecutor | None = None
        self.messages: list[Message] = []
        self.turns = 0

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        self.messages = list(messages)
        self.executor = executor
        self.started.set()
        await self.finished.wait()
        return AgentResult(
            messages=self.messages, stop_reason=StopReason.FINAL_ANSWER, turns=self.turns
        )


class Episode:
    """One rollout in progress: :meth:`call` runs a tool in its slot, :meth:`finish` verifies."""

    def __init__(
        self, bridge: _Bridge, rollout: Future[ScoredRollout | None] | None = None
    ) -> None:
        self.bridge = bridge
        self._calls = itertools.count()
        self.rollout = rollout

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run tool ``name`` in the episode's slot; the model sees the returned text."""
        executor = self.bridge.executor
        assert executor is not None, "the episode has not started"
        call = ToolCall(id=f"call_{next(self._calls)}", name=name, arguments=json.dumps(arguments))
        result = await executor(name, arguments)
        self.bridge.messages += [
            Message.assistant(None, (call,)),
            Message.tool(result.content, call.id, name),
        ]
        self.bridge.turns += 1
        return result.content

    def finish(self) -> None:
        """Let the runner go on to ``verify`` with the tool calls made."""
        self.bridge.finished.set()


class EpisodeHost:
    """The sandbox pool, environment and toolsets of one spec, for driven episodes."""

    def __init__(self, spec: RolloutSpec, runner_factory: _RunnerFactory) -> None:
        self.spec = spec
        self._runner_factory = runner_factory
        self.environment = runner_factory.environment
        self.toolsets = runner_factory.chosen

    @property
    def tool_schemas(self) -> list[ToolSchema]:
        """The schemas of the tools every episode gets."""
        return [tool.schema for toolset in self.toolsets for tool in toolset.tools]

    def prompt(self, item: Item) -> list[Message]:
        """What the model is shown before its first turn (system prompt and prefill included)."""
        return list(self._runner_factory.pooled_environment.prompt(item))

    async def run(self, item: Item, bridge: _Bridge, *, seed: int) -> ScoredRollout:
        """The whole episode on ``bridge``; returns once the driver finished (or it failed)."""
        runner = self._runner_factory.runner(bridge)
        rollout = await runner.run_rollout(item, self.toolsets, seed=seed)
        bridge.started.set()  # a setup that failed never started the bridge
        return rollout


class _RunnerFactory:
    def __init__(
        self,
        environment: Environment,
        pool: SlotPool,
        toolsets: Sequence[Toolset],
        spec: RolloutSpec,
    ) -> None:
        self.environment = environment
        self._pool = pool
        self._toolsets = tuple(toolsets)
        # one attempt: a retry cannot replay what the driver's model already did
        self._config = RunnerConfig(
            max_attempts=1,
            acquire_timeout=spec.pool.acquire_timeout_s,
            agent_timeout=spec.budgets.agent_phase_timeout_s,
        )
        tools = spec.toolsets
        selection = ToolsetSelection(
            enabled=tools.enabled, disabled=tools.disabled, distribution=tools.distribution
        )
        probe = self.runner(_Bridge())  # built on the host's event loop (its events need one)
        self.pooled_environment = probe.env
        self.chosen = probe.resolve_toolsets(selection, seed=0)

    def runner(self, bridge: _Bridge) -> RolloutRunner:
        return RolloutRunner(
            self.environment, self._pool, bridge, self._toolsets, config=self._config
        )


@asynccontextmanager
async def open_episode_host(
    spec: RolloutSpec, *, environment: Environment | None = None
) -> AsyncIterator[EpisodeHost]:
    """Validate ``spec`` (its model section is not used), start its pool and yield the host;
    the pool is closed on exit."""
    environment = validate(spec, environment=environment)
    toolsets = build_toolsets(spec.toolsets.command_timeout_s, spec.toolsets.max_command_timeout_s)
    backend = build_backend(spec.sandbox)
    async with AsyncExitStack() as stack:
        pool = await stack.enter_async_context(SandboxPool(backend, _pool_config(spec)))
        yield EpisodeHost(spec, _RunnerFactory(environment, pool, toolsets, spec))


class BlockingEpisodes:
    """An :class:`EpisodeHost` for a synchronous driver (see the module doc)."""

    def __init__(self, portal: BlockingPortal, host: EpisodeHost, timeout_s: float) -> None:
        self._portal = portal
        self.host = host
        self._timeout_s = timeout_s
        self._open: set[Episode] = set()

    def start(self, item: Item, *, seed: int) -> Episode:
        """Acquire a slot and set ``item``'s workspace up; the episode is open until
        :meth:`finish` or :meth:`abort`. A setup that failed shows in :meth:`finish`."""
        bridge: _Bridge = self._portal.call(_Bridge)
        episode = Episode(bridge)
        self._open.add(episode)  # before its task: an interrupt from here on still aborts it
        episode.rollout = self._portal.start_task_soon(partial(self._run, item, bridge, seed))
        self._portal.call(self._wait, bridge.started)
        return episode

    def call(self, episode: Episode, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool of ``episode`` (see :meth:`Episode.call`)."""
        content: str = self._portal.call(self._within, episode.call, name, arguments)
        return content

    def finish(self, episode: Episode) -> RolloutOutcome:
        """Verify ``episode`` on its slot and release the slot: its reward, or why it has none."""
        self._open.discard(episode)
        assert episode.rollout is not None
        self._portal.call(_finish, episode)
        rollout = episode.rollout.result(timeout=self._timeout_s)
        assert rollout is not None  # only an abort returns none
        return RolloutOutcome.of(rollout)

    def abort(self, episode: Episode) -> None:
        """Cancel ``episode`` without a reward; returns once its slot is released."""
        self._open.discard(episode)
        self._portal.call(self._abort, episode.bridge)

    def close(self) -> None:
        """Abort every episode still open."""
        for episode in list(self._open):
            self.abort(episode)

    async def _run(self, item: Item, bridge: _Bridge, seed: int) -> ScoredRollout | None:
        bridge.began = True
        try:
            with bridge.scope:
                return await self.host.run(item, bridge, seed=seed)
            return None
        finally:
            bridge.done.set()

    async def _abort(self, bridge: _Bridge) -> None:
        bridge.scope.cancel()  # a task that begins later ends at once, with nothing acquired
        if bridge.began:
            await self._wait(bridge.done)

    async def _wait(self, event: anyio.Event) -> None:
        with anyio.fail_after(self._timeout_s):
            await event.wait()

    async def _within(self, call: Any, *args: Any) -> Any:
        with anyio.fail_after(self._timeout_s):
            return await call(*args)


async def _finish(episode: Episode) -> None:
    episode.finish()


@contextmanager
def blocking_episodes(
    spec: RolloutSpec, *, environment: Environment | None = None, timeout_s: float = 600.0
) -> Iterator[BlockingEpisodes]:
    """A started :class:`BlockingEpisodes` for ``spec``; on exit every open episode is aborted
    and the pool closed. ``timeout_s`` bounds each wait (setup, a tool call, verify)."""
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal())
        host = stack.enter_context(
            portal.wrap_async_context_manager(open_episode_host(spec, environment=environment))
        )
        episodes = BlockingEpisodes(portal, host, timeout_s)
        stack.callback(episodes.close)
        yield episodes
