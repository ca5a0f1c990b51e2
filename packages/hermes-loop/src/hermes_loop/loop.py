"""The agent loop: generate, validate and run tool calls, repeat until a stop reason."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import anyio
import attrs
from hermes_protocols import (
    AgentResult,
    BackendTimeout,
    HermesError,
    JSONObject,
    Message,
    SamplingParams,
    StopReason,
    TokenTrace,
    ToolCallError,
    ToolExecutor,
    ToolSchema,
    TurnStats,
)

from hermes_loop.config import (
    GenerationFinished,
    LoopEvent,
    LoopLimits,
    Observer,
    RolloutFinished,
    ToolCallFinished,
    TurnStarted,
)
from hermes_loop.models import ChatModel, Session, TokenModel, TurnOutput
from hermes_loop.tool_calls import ToolHandler, run_calls

_log = logging.getLogger(__name__)


@attrs.define(slots=True)
class _Rollout:
    """Mutable state of one rollout, so a partial result survives any stop."""

    messages: list[Message]
    sampling: SamplingParams
    session: Session | None = None
    turns: int = 0
    stop: StopReason | None = None
    error: str | None = None
    tool_errors: list[ToolCallError] = attrs.field(factory=list)
    stats: list[TurnStats] = attrs.field(factory=list)


class AgentLoop:
    """Runs rollouts with one model configuration; implements :class:`hermes_protocols.Agent`.

    ``model`` is a :class:`ChatModel` (phase 1) or :class:`TokenModel` (phase 2). Tool calls of
    one turn run concurrently unless ``concurrent_tool_calls`` is false; their results are
    appended in call order. ``tool_handler`` replaces the plain executor call per tool call;
    ``observers`` receive :data:`LoopEvent` objects. One instance serves any number of
    concurrent rollouts.
    """

    def __init__(
        self,
        model: ChatModel | TokenModel,
        *,
        sampling: SamplingParams | None = None,
        limits: LoopLimits | None = None,
        concurrent_tool_calls: bool = True,
        tool_handler: ToolHandler | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.limits = limits or LoopLimits()
        self.concurrent_tool_calls = concurrent_tool_calls
        self.tool_handler = tool_handler
        self.observers = tuple(observers)

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        cancel: anyio.Event | None = None,
        seed: int | None = None,
    ) -> AgentResult:
        """Run one rollout to a stop reason and return everything it produced.

        ``seed`` replaces the sampling seed of this rollout (``None``: the loop's own).

        Setting ``cancel`` ends the rollout promptly with ``cancelled`` and the partial result.
        Cancelling the calling task (anyio cancel scope) propagates as usual, leaving no task
        behind.
        """
        sampling = self.sampling if seed is None else attrs.evolve(self.sampling, seed=seed)
        state = _Rollout(messages=list(messages), sampling=sampling)
        limit = self.limits.rollout_timeout_s
        deadline = anyio.current_time() + limit if limit is not None else math.inf
        with anyio.CancelScope(deadline=deadline) as scope:
            if cancel is None:
                await self._turns(state, tools, executor)
            else:
                await self._turns_cancellable(state, tools, executor, cancel)
        if state.stop is None:
            timed_out = scope.cancelled_caught and anyio.current_time() >= deadline
            state.stop = StopReason.ROLLOUT_TIMEOUT if timed_out else StopReason.CANCELLED
        return await self._result(state)

    async def _turns_cancellable(
        self,
        state: _Rollout,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        cancel: anyio.Event,
    ) -> None:
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await cancel.wait()
                if state.stop is None:
                    state.stop = StopReason.CANCELLED
                group.cancel_scope.cancel()

            group.start_soon(watch)
            await self._turns(state, tools, executor)
            group.cancel_scope.cancel()

    async def _turns(
        self, state: _Rollout, tools: Sequence[ToolSchema], executor: ToolExecutor
    ) -> None:
        limits = self.limits
        try:
            session = self.model.open(state.messages, tools, state.sampling)
            await session.start()
        except HermesError as exc:  # a backend's failure; anything else is a bug and raises
            state.stop, state.error = StopReason.BACKEND_ERROR, f"{type(exc).__name__}: {exc}"
            return
        state.session = session
        emit = self._emit if self.observers else None
        gen_timeout = limits.generation_timeout_s

        while True:
            if state.turns >= limits.max_turns:
                state.stop = StopReason.MAX_TURNS
                return
            max_tokens = limits.max_tokens_per_turn
            used = session.context_tokens()
            if limits.max_context_tokens is not None:
                room = limits.max_context_tokens - used
                if room <= 0:
                    state.stop = StopReason.CONTEXT_EXHAUSTED
                    return
                max_tokens = min(max_tokens, room)
            turn = state.turns + 1
            if emit:
                emit(TurnStarted(turn, used))
            started = time.perf_counter()
            try:
                if gen_timeout is None:
                    out = await session.generate(turn, max_tokens)
                else:
                    out = await _generate_within(session, turn, max_tokens, gen_timeout)
            except HermesError as exc:  # a backend's failure; anything else is a bug and raises
                state.stop, state.error = StopReason.BACKEND_ERROR, f"{type(exc).__name__}: {exc}"
                return
            generated = time.perf_counter()
            state.turns = turn
            state.messages.append(out.message)
            if emit:
                emit(
                    GenerationFinished(
                        turn, out.completion_tokens, out.finish_reason, generated - started
                    )
                )
            tool_messages: list[Message] = []
            if out.calls:
                outcomes = await run_calls(
                    out.calls,
                    turn=turn,
                    executor=executor,
                    handler=self.tool_handler,
                    timeout=limits.tool_timeout_s,
                    concurrent=self.concurrent_tool_calls,
                )
                for outcome in outcomes:
                    call = outcome.call
                    tool_messages.append(Message.tool(outcome.result.content, call.id, call.name))
                    if outcome.error is not None:
                        state.tool_errors.append(outcome.error)
                    if emit:
                        emit(
                            ToolCallFinished(
                                turn, call.name, call.id, outcome.seconds, outcome.error
                            )
                        )
            state.stats.append(
                TurnStats(
                    turn=turn,
                    generation_s=generated - started,
                    tools_s=time.perf_counter() - generated,
                    prompt_tokens=out.prompt_tokens,
                    completion_tokens=out.completion_tokens,
                    tool_calls=len(out.calls),
                    reasoning=out.message.reasoning,
                    finish_reason=out.finish_reason,
                )
            )
            if not out.calls:
                state.stop = _no_call_stop(out.finish_reason, max_tokens, limits)
                return
            state.messages.extend(tool_messages)
            try:
                await session.add_tool_messages(tool_messages)
            except HermesError as exc:  # e.g. a template that cannot be bridged token-exactly
                state.stop = StopReason.BACKEND_ERROR
                state.error = f"cannot append tool results: {type(exc).__name__}: {exc}"
                return

    async def _result(self, state: _Rollout) -> AgentResult:
        assert state.stop is not None
        trace = drift = None
        if state.session is not None:
            with anyio.CancelScope(shield=True):
                try:
                    trace, drift = await state.session.finish(state.messages)
                except Exception as exc:  # drift is a metric: never lose the rollout over it
                    state.error = state.error or f"drift check failed: {exc}"
        if self.observers:
            self._emit(RolloutFinished(state.turns, state.stop, state.error))
        return AgentResult(
            messages=state.messages,
            stop_reason=state.stop,
            turns=state.turns,
            trace=trace,
            tool_errors=state.tool_errors,
            turn_stats=state.stats,
            drift=drift,
            error=state.error,
            metadata={"sampling": sampling_record(state.sampling, trace, self._engine())},
        )

    def _engine(self) -> JSONObject | None:
        return self.model.engine if isinstance(self.model, TokenModel) else None

    def _emit(self, event: LoopEvent) -> None:
        """Give ``event`` to every observer; an observer that raises is logged, never fatal."""
        for observer in self.observers:
            try:
                observer(event)
            except Exception:
                _log.exception("observer %r failed on %s; the rollout goes on", observer, event)


def sampling_record(
    sampling: SamplingParams, trace: TokenTrace | None, engine: JSONObject | None = None
) -> JSONObject:
    """What a record says about how its tokens were sampled: the parameters, the logprob mode
    requested and the one the engine returned (``None`` without logprobs), the positions
    without a logprob, and the ``engine`` that computed them (``None`` when unknown, e.g.
    phase 1; see :mod:`hermes_loop.engine`)."""
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
        "stop": list(sampling.stop),
        "logprob_mode_requested": sampling.logprob_mode,
        "logprob_mode": trace.logprob_mode if trace is not None else None,
        "missing_logprobs": list(trace.missing_logprobs) if trace is not None else [],
        "engine": engine,
    }


def _no_call_stop(finish_reason: str, max_tokens: int, limits: LoopLimits) -> StopReason:
    """Why a turn without tool calls ends the rollout.

    A reply cut by the token limit is not an answer: ``context_exhausted`` when the context
    budget shortened the turn, ``truncated`` when the per-turn limit cut it.
    """
    if finish_reason != "length":
        return StopReason.FINAL_ANSWER
    if max_tokens < limits.max_tokens_per_turn:
        return StopReason.CONTEXT_EXHAUSTED
    return StopReason.TRUNCATED


class GenerationTimeout(BackendTimeout):
    """A generation did not finish within ``LoopLimits.generation_timeout_s``."""


async def _generate_within(
    session: Session, turn: int, max_tokens: int, timeout: float
) -> TurnOutput:
    with anyio.move_on_after(timeout) as scope:
        return await session.generate(turn, max_tokens)
    assert scope.cancelled_caught
    raise GenerationTimeout(
        f"generation of turn {turn} exceeded generation_timeout_s={timeout}; raise it or "
        "lower max_tokens_per_turn"
    )


async def run(
    model: ChatModel | TokenModel,
    messages: Sequence[Message],
    *,
    tools: Sequence[ToolSchema],
    executor: ToolExecutor,
    sampling: SamplingParams | None = None,
    limits: LoopLimits | None = None,
    concurrent_tool_calls: bool = True,
    tool_handler: ToolHandler | None = None,
    observers: Sequence[Observer] = (),
    cancel: anyio.Event | None = None,
) -> AgentResult:
    """One rollout with a one-off :class:`AgentLoop` (see its docs for every option)."""
    loop = AgentLoop(
        model,
        sampling=sampling,
        limits=limits,
        concurrent_tool_calls=concurrent_tool_calls,
        tool_handler=tool_handler,
        observers=observers,
    )
    return await loop.run(messages, tools=tools, executor=executor, cancel=cancel)
