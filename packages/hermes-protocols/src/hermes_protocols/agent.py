"""Agent vocabulary: stop reasons, tool errors, per-turn stats, the agent result and Protocol."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from hermes_protocols.json_types import JSONObject
from hermes_protocols.messages import Message
from hermes_protocols.tokens import DriftReport, TokenTrace
from hermes_protocols.tools import ToolExecutor, ToolSchema


class StopReason(enum.StrEnum):
    FINAL_ANSWER = "final_answer"
    TRUNCATED = "truncated"
    MAX_TURNS = "max_turns"
    CONTEXT_EXHAUSTED = "context_exhausted"
    ROLLOUT_TIMEOUT = "rollout_timeout"
    BACKEND_ERROR = "backend_error"
    CANCELLED = "cancelled"


class ToolErrorKind(enum.StrEnum):
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    SCHEMA_VIOLATION = "schema_violation"
    EXECUTION_ERROR = "execution_error"
    TIMEOUT = "timeout"


@attrs.frozen(slots=True)
class ToolCallError:
    """A tool call that failed, with the turn it happened in and the arguments as emitted."""

    kind: ToolErrorKind
    turn: int
    tool: str
    arguments: str
    message: str


@attrs.frozen(slots=True)
class TurnStats:
    """Timings (seconds) and token usage of one turn, plus its reasoning text if any."""

    turn: int
    generation_s: float
    tools_s: float
    prompt_tokens: int
    completion_tokens: int
    tool_calls: int
    reasoning: str | None = None
    finish_reason: str = "stop"


def _messages(values: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(values)


def _tool_errors(values: Iterable[ToolCallError]) -> tuple[ToolCallError, ...]:
    return tuple(values)


def _turn_stats(values: Iterable[TurnStats]) -> tuple[TurnStats, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class AgentResult:
    """Everything one agent rollout produced, complete even when it stopped early.

    ``trace`` is set in token mode (phase 2) and ``None`` in chat mode unless a tokenizer rebuilt
    it, in which case its ``source`` is ``"retokenized"``.
    """

    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    stop_reason: StopReason
    turns: int
    trace: TokenTrace | None = None
    tool_errors: tuple[ToolCallError, ...] = attrs.field(default=(), converter=_tool_errors)
    turn_stats: tuple[TurnStats, ...] = attrs.field(default=(), converter=_turn_stats)
    drift: DriftReport | None = None
    error: str | None = None
    metadata: JSONObject = attrs.field(factory=dict)


@runtime_checkable
class Agent(Protocol):
    """Runs one rollout: messages and tools in, :class:`AgentResult` out, never raising for
    backend or tool failures (they end up in the result). ``seed`` (when given) replaces the
    sampling seed of this rollout only, so one agent serves rollouts with different seeds."""

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult: ...
