"""The rollout runner: item -> slot -> setup -> agent -> verify (same slot) -> release.

One rollout is one structured unit with a timeout per phase. Infrastructure failures (slot
died, backend down, a phase timed out, setup or verification raised a ``HermesError``) are
retried in a fresh slot up to ``RunnerConfig.max_attempts`` and then reported as
``ScoredRollout(failure=RolloutFailure(...))``; they are never scored 0.0. Any other exception
(a ``ValueError`` in an environment's ``verify``) is a bug: it propagates and ends the run.
An item that brings its own image (``ImageEnvironment.image_for``) gets a slot running it from
an ``ImageSlotPool``; an image that cannot be had fails that item as infrastructure.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import attrs
from hermes_protocols import (
    Agent,
    AgentResult,
    ConfigError,
    Environment,
    FailureKind,
    HermesError,
    Item,
    RolloutFailure,
    Score,
    ScoredRollout,
    Slot,
    SlotPool,
    StopReason,
    ToolSchema,
    Toolset,
)
from hermes_protocols.convert import tools_to_openai

from hermes_envs.acquire import SlotUnavailable, acquire_slot, for_pool
from hermes_envs.context import SlotRewardContext
from hermes_envs.errors import PhaseTimeout
from hermes_envs.toolsets import (
    SlotToolExecutor,
    ToolsetDistribution,
    ToolsetSelection,
    resolve_toolsets,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
#: what one attempt produced: the agent result, its score, phase timings, setup metadata
_Attempt = tuple[AgentResult, Score, dict[str, float], dict[str, Any]]


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ConfigError(f"RunnerConfig.{attribute.name} must be > 0, got {value}")


@attrs.frozen(slots=True)
class RunnerConfig:
    """Retry limit and per-phase timeouts (seconds)."""

    max_attempts: int = attrs.field(default=3, validator=_positive)
    retry_delay_s: float = 0.5
    acquire_timeout: float = attrs.field(default=120.0, validator=_positive)
    setup_timeout: float = attrs.field(default=600.0, validator=_positive)
    agent_timeout: float = attrs.field(default=3600.0, validator=_positive)
    verify_timeout: float = attrs.field(default=900.0, validator=_positive)
    release_timeout: float = attrs.field(default=60.0, validator=_positive)


class _InfraFailure(Exception):
    def __init__(self, phase: str, message: str) -> None:
        super().__init__(f"{phase}: {message}")
        self.phase = phase
        self.message = message


def _schemas(toolsets: Sequence[Toolset]) -> list[ToolSchema]:
    """The schemas of ``toolsets`` in order, the first of each name (as the executor binds)."""
    seen: dict[str, ToolSchema] = {}
    for toolset in toolsets:
        for tool in toolset.tools:
            seen.setdefault(tool.schema.name, tool.schema)
    return list(seen.values())


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class RolloutRunner:
    """Runs rollouts of one environment with an app-provided pool, agent and toolsets.

    ``run_rollout(item, toolsets)`` runs one rollout in its own slot; callers run groups and
    many items concurrently themselves, with the toolsets :meth:`resolve_toolsets` draws for a
    group. ``env`` is the environment set up for ``pool`` (:func:`for_pool`).
    """

    def __init__(
        self,
        env: Environment,
        pool: SlotPool,
        agent: Agent,
        toolsets: Sequence[Toolset],
        *,
        config: RunnerConfig | None = None,
        distributions: Mapping[str, ToolsetDistribution] | None = None,
    ) -> None:
        self.env = for_pool(env, pool)
        self.pool = pool
        self.agent = agent
        self.toolsets = tuple(toolsets)
        self.config = config or RunnerConfig()
        self.distributions = dict(distributions or {})

    def resolve_toolsets(self, selection: ToolsetSelection, *, seed: int) -> tuple[Toolset, ...]:
        """The toolsets a group uses: deterministic for ``(selection, seed)``."""
        return resolve_toolsets(
            self.toolsets,
            self.env.toolsets,
            selection,
            distributions=self.distributions,
            rng=random.Random(seed),
        )

    async def run_rollout(
        self,
        item: Item,
        toolsets: Sequence[Toolset],
        *,
        group_index: int = 0,
        seed: int | None = None,
    ) -> ScoredRollout:
        """One rollout with infrastructure retries; never raises for infrastructure failures.

        ``seed`` is the rollout's sampling seed (``None``: the agent's own); a retry samples
        with a seed derived from it, so a failure caused by what was sampled (a deterministic
        backend error on one output) is not replayed identically."""
        rollout_id = f"{self.env.name}/{item.id}/{group_index}"
        shown = {  # what the model is told: the tools of its toolsets, as OpenAI schemas
            "toolsets": [t.name for t in toolsets],
            "tools": tools_to_openai(_schemas(toolsets)),
        }
        last: _InfraFailure | None = None
        attempts = 0
        for attempt in range(1, self.config.max_attempts + 1):
            attempts = attempt
            try:
                result, score, timings, workspace = await self._attempt(
                    item, toolsets, f"{rollout_id}#{attempt}", attempt_seed(seed, attempt)
                )
            except _InfraFailure as failure:
                last = failure
                log.warning(
                    "rollout %s attempt %d/%d failed (infrastructure) in %s: %s",
                    rollout_id,
                    attempt,
                    self.config.max_attempts,
                    failure.phase,
                    failure.message,
                )
                if attempt < self.config.max_attempts and self.config.retry_delay_s > 0:
                    await anyio.sleep(self.config.retry_delay_s * attempt)
                continue
            return ScoredRollout(
                id=rollout_id,
                env=self.env.name,
                item=item,
                group_index=group_index,
                result=result,
                score=score,
                timings=timings,
                metadata={**shown, "attempts": attempt, "workspace": workspace},
            )
        assert last is not None
        return ScoredRollout(
            id=rollout_id,
            env=self.env.name,
            item=item,
            group_index=group_index,
            result=None,
            score=None,
            failure=RolloutFailure(
                kind=FailureKind.INFRASTRUCTURE,
                phase=last.phase,
                message=last.message,
                attempts=attempts,
            ),
            metadata={**shown, "attempts": attempts},
        )

    async def _attempt(
        self, item: Item, toolsets: Sequence[Toolset], trajectory_id: str, seed: int | None
    ) -> _Attempt:
        cfg = self.config
        timings: dict[str, float] = {}
        start = time.perf_counter()
        try:
            slot = await acquire_slot(
                self.env, self.pool, item, trajectory_id, timeout=cfg.acquire_timeout
            )
        except SlotUnavailable as exc:
            raise _InfraFailure("acquire", str(exc)) from exc
        timings["acquire_s"] = time.perf_counter() - start
        try:
            return await self._on_slot(item, toolsets, slot, timings, seed)
        finally:
            released = time.perf_counter()
            with anyio.move_on_after(cfg.release_timeout, shield=True) as scope:
                try:
                    await self.pool.release(slot)
                except Exception as exc:
                    log.warning("releasing slot %s failed: %s", slot.slot_id, _describe(exc))
            if scope.cancelled_caught:
                log.warning("releasing slot %s timed out", slot.slot_id)
            timings["release_s"] = time.perf_counter() - released

    async def _on_slot(
        self,
        item: Item,
        toolsets: Sequence[Toolset],
        slot: Slot,
        timings: dict[str, float],
        seed: int | None,
    ) -> _Attempt:
        with anyio.CancelScope() as scope:
            clock = _PhaseClock(scope, timings)
            return await self._phases(item, toolsets, slot, clock, seed)
        raise _InfraFailure(clock.name, _describe(PhaseTimeout(clock.name, clock.timeout)))

    async def _phases(
        self,
        item: Item,
        toolsets: Sequence[Toolset],
        slot: Slot,
        clock: _PhaseClock,
        seed: int | None,
    ) -> _Attempt:
        cfg = self.config
        metadata = await clock.run("setup", cfg.setup_timeout, self.env.setup_workspace(item, slot))
        executor = SlotToolExecutor(toolsets, slot)
        result = await clock.run(
            "agent",
            cfg.agent_timeout,
            self.agent.run(
                self.env.prompt(item),
                tools=[t.schema for t in executor.tools],
                executor=executor,
                seed=seed,
            ),
        )
        if executor.sandbox_errors:
            raise _InfraFailure("agent", "slot failed mid-rollout: " + executor.sandbox_errors[0])
        if result.stop_reason is StopReason.BACKEND_ERROR:
            raise _InfraFailure("agent", f"inference backend failed: {result.error}")
        ctx = SlotRewardContext(slot, metadata)
        score = await clock.run("verify", cfg.verify_timeout, self.env.verify(item, result, ctx))
        if score.failure is FailureKind.INFRASTRUCTURE:
            raise _InfraFailure("verify", score.details or "verifier reported an infra failure")
        return result, score, clock.timings, dict(metadata)


def attempt_seed(seed: int | None, attempt: int) -> int | None:
    """The sampling seed of ``attempt`` (1-based): ``seed`` itself first, then distinct and
    reproducible seeds derived from it."""
    if seed is None or attempt <= 1:
        return seed
    digest = hashlib.sha256(f"{seed}#attempt{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


class _PhaseClock:
    """One cancel scope for every phase of an attempt; its deadline moves with each phase
    (one scope instead of one per phase keeps the runner's own cost low)."""

    def __init__(self, scope: anyio.CancelScope, timings: dict[str, float]) -> None:
        self.scope = scope
        self.timings = timings
        self.name = ""
        self.timeout = 0.0

    async def run(self, name: str, timeout: float, work: Awaitable[T]) -> T:
        self.name, self.timeout = name, timeout
        self.scope.deadline = anyio.current_time() + timeout
        start = time.perf_counter()
        try:
            return await work
        except HermesError as exc:  # a sandbox or backend failing; anything else is a bug
            raise _InfraFailure(name, _describe(exc)) from exc
        finally:
            self.timings[f"{name}_s"] = time.perf_counter() - start
