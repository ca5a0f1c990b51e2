"""Rollouts whose model calls an outside policy answers: a trainer that owns the sampling
(tinker-cookbook's ``Env.step``) drives our agent loop one generation at a time.

:func:`open_driven_session` opens the spec's token model (its tokenizer, chat template, parser
and end ids stay ours) and a session whose loop asks a :class:`DrivenEpisode` instead of the
sampler: each prompt the ledger builds (the previous prompt, the generated ids, the bridge) is
handed out as it is, and the ids the policy generated are the ids the ledger records. The
session's own sampler stays available as :attr:`DrivenSession.sampler` for a policy backed by
our model. Everything else (slot, ``setup_workspace``, tools, ``verify``, release) is the
rollout runner's, unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import attrs
import hermes_loop
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from hermes_loop import ModelHandle, TokenModel
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    ConfigError,
    FinishReason,
    Generation,
    HermesError,
    Item,
    SamplingParams,
    ScoredRollout,
    TokenBackend,
    ToolCallParser,
)

from hermes_rollouts.session import RolloutSession, get_parser, open_session
from hermes_rollouts.single_rollout import RolloutOutcome
from hermes_rollouts.spec import RolloutSpec

#: how long an episode waits for the policy's action or for its rollout's next prompt
STEP_TIMEOUT_S = 600.0

_EPISODE: contextvars.ContextVar[_Channel] = contextvars.ContextVar("hermes_driven_episode")


class InfrastructureFailure(HermesError):
    """A driven rollout could not be judged (sandbox, setup or verifier failure)."""


@attrs.frozen(slots=True)
class Action:
    """What the policy generated for one prompt: ids (end id included when sampled), their
    logprobs (``None``: the policy gave none) and why generation stopped."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    finish_reason: FinishReason


@attrs.define
class _Channel:
    prompts: ObjectSendStream[tuple[int, ...] | ScoredRollout]
    actions: ObjectReceiveStream[Action]


class DrivenBackend:
    """A :class:`~hermes_protocols.TokenBackend` that hands each prompt to the episode of the
    calling rollout and returns the action it gets back."""

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        channel = _EPISODE.get(None)
        if channel is None:
            raise BackendError("a driven model generates only inside a DrivenEpisode")
        try:
            with anyio.fail_after(STEP_TIMEOUT_S):
                await channel.prompts.send(tuple(prompt_ids))
                action = await channel.actions.receive()
        except TimeoutError as exc:
            raise BackendTimeout(f"the policy gave no action in {STEP_TIMEOUT_S:.0f} s") from exc
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise BackendError("the policy stopped before answering a prompt") from exc
        logprobs = action.logprobs
        if logprobs is None:
            return Generation(
                action.ids,
                [math.nan] * len(action.ids),
                action.finish_reason,
                missing_logprobs=range(len(action.ids)),
            )
        return Generation(action.ids, logprobs, action.finish_reason, logprob_mode="sampled")


@attrs.frozen
class DrivenSession:
    """A started session whose rollouts a policy drives, and our own sampler."""

    session: RolloutSession
    sampler: TokenBackend
    end_token_ids: frozenset[int]

    def episode(self, item: Item, *, seed: int, group_index: int = 0) -> DrivenEpisode:
        return DrivenEpisode(self.session, item, seed=seed, group_index=group_index)


@asynccontextmanager
async def open_driven_session(spec: RolloutSpec) -> AsyncIterator[DrivenSession]:
    """Open ``spec``'s token model and a session driven through :class:`DrivenEpisode`
    (one attempt per rollout: a retry would show the policy a prompt it never continued)."""
    if spec.model.server_type not in ("embedded", "llama_cpp", "sglang", "vllm"):
        raise ConfigError(
            f"ModelSpec.server_type {spec.model.server_type!r} has no token ids; a driven "
            "session needs a token model (embedded, llama_cpp, sglang or vllm)"
        )
    spec = attrs.evolve(spec, budgets=attrs.evolve(spec.budgets, max_attempts=1))
    parser = get_parser(spec.parser)
    async with hermes_loop.open_model(spec.model, parser) as handle:
        model = handle.model
        assert isinstance(model, TokenModel)  # a token server type, checked above
        driven = attrs.evolve(model, backend=DrivenBackend(), check_drift=True)

        @asynccontextmanager
        async def opener(_: ToolCallParser) -> AsyncIterator[ModelHandle]:
            yield attrs.evolve(handle, model=driven)

        async with open_session(spec, model=opener, preflight=False) as session:
            ends = model.end_token_ids or frozenset({model.tokenizer.eos_token_id})
            yield DrivenSession(session, model.backend, ends)


class DrivenEpisode:
    """One rollout of a driven session, stepped by its caller: :meth:`start` returns the first
    prompt, :meth:`step` each next one, or the finished rollout. :meth:`close` cancels a
    rollout still running and waits for its slot's release (safe to call twice); an episode
    closed before it started never starts (a group's cleanup can run before a sibling's
    :meth:`start`: tinker-cookbook's ``asyncio.gather`` leaves the siblings of a failed
    rollout running).

    The rollout runs as an asyncio task of its own, not in an AnyIO task group: it must outlive
    each :meth:`start`/:meth:`step` call, and a trainer's ``Env`` API (tinker-cookbook's) has no
    scope around an episode to hold a task group open in; :meth:`close` is that scope's end.
    It cancels the rollout through an AnyIO cancel scope, never ``Task.cancel()``: a native
    cancel cuts through the shielded slot release and abandons its worker thread, which then
    mounted the slot again after the pool had removed its host. The channel reaches the
    rollout's model calls through a context variable, which each task copies when it starts
    (no state shared between episodes)."""

    def __init__(
        self, session: RolloutSession, item: Item, *, seed: int, group_index: int = 0
    ) -> None:
        self._session = session
        self._item = item
        self._seed = seed
        self._group_index = group_index
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None  # the rollout's, entered by its task
        self._closed = False
        self._prompts_out, self._prompts = anyio.create_memory_object_stream[
            tuple[int, ...] | ScoredRollout
        ]()
        self._actions, self._actions_in = anyio.create_memory_object_stream[Action]()
        self.rollout: ScoredRollout | None = None

    async def start(self) -> tuple[int, ...] | ScoredRollout:
        """Start the rollout (slot, workspace setup, first prompt)."""
        if self._task is not None:
            raise RuntimeError("a DrivenEpisode starts once")
        if self._closed:
            raise BackendError("the episode was closed before it started")
        self._scope = anyio.CancelScope()
        self._task = asyncio.get_running_loop().create_task(self._run(self._scope))
        return await self._next()

    async def step(self, action: Action) -> tuple[int, ...] | ScoredRollout:
        """Answer the last prompt with ``action``; the next prompt or the finished rollout."""
        with anyio.fail_after(STEP_TIMEOUT_S):
            await self._actions.send(action)
        return await self._next()

    async def _next(self) -> tuple[int, ...] | ScoredRollout:
        try:
            with anyio.fail_after(STEP_TIMEOUT_S):
                found = await self._prompts.receive()
        except TimeoutError as exc:
            raise BackendTimeout(f"the rollout gave no prompt in {STEP_TIMEOUT_S:.0f} s") from exc
        except anyio.EndOfStream as exc:
            raise BackendError("the rollout ended without a result") from exc
        if isinstance(found, ScoredRollout):
            self.rollout = found
        return found

    async def _run(self, scope: anyio.CancelScope) -> None:
        channel = _Channel(self._prompts_out, self._actions_in)
        token = _EPISODE.set(channel)
        try:
            with scope:
                async with self._prompts_out, self._actions_in:
                    rollout = await self._session.run_rollout(
                        self._item, seed=self._seed, group_index=self._group_index
                    )
                    await self._prompts_out.send(rollout)
        finally:
            _EPISODE.reset(token)

    @property
    def running(self) -> bool:
        """Whether the rollout started and has not ended (its slot may be held)."""
        return self._task is not None and not self._task.done()

    async def close(self) -> None:
        self._closed = True
        task = self._task
        if self._scope is not None and task is not None:
            self._scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(STEP_TIMEOUT_S):
                await asyncio.wait([task])
        self._actions.close()
        self._prompts.close()


def judged_reward(rollout: ScoredRollout) -> float:
    """The verifier's reward of a finished rollout; :class:`InfrastructureFailure` when it
    could not be judged (never a 0.0 reward)."""
    outcome = RolloutOutcome.of(rollout)
    if outcome.reward is None:
        raise InfrastructureFailure(
            f"hermes rollout infrastructure failure: {outcome.infrastructure}"
        )
    return outcome.reward
