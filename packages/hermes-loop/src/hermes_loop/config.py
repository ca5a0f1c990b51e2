"""Loop limits and observer events."""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

import attrs
from hermes_protocols import ConfigError, StopReason, ToolCallError


def _positive_or_none(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise ConfigError(f"{attribute.name} must be positive (or None for no limit), not {value}")


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not (isinstance(value, int) and value > 0):
        raise ConfigError(f"{attribute.name} must be a positive integer, not {value}")


@attrs.frozen(slots=True)
class LoopLimits:
    """Budgets of one rollout.

    ``max_tokens_per_turn`` caps each generation; ``max_context_tokens`` is the sequence budget
    (the rollout stops with ``context_exhausted``, history is never truncated). Each generation
    asks for ``min(max_tokens_per_turn, max_context_tokens - context used)`` tokens.
    ``rollout_timeout_s`` is the wall-clock budget of the whole rollout, ``tool_timeout_s`` the
    budget of each tool call and ``generation_timeout_s`` the budget of each generation (on top
    of the backend's own per-request timeout and retries); an overrun generation ends the
    rollout with ``backend_error``.
    """

    max_turns: int = attrs.field(default=20, validator=_positive)
    max_tokens_per_turn: int = attrs.field(default=1024, validator=_positive)
    max_context_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)
    rollout_timeout_s: float | None = attrs.field(default=None, validator=_positive_or_none)
    tool_timeout_s: float | None = attrs.field(default=120.0, validator=_positive_or_none)
    generation_timeout_s: float | None = attrs.field(default=None, validator=_positive_or_none)


@attrs.frozen(slots=True)
class TurnStarted:
    turn: int
    context_tokens: int


@attrs.frozen(slots=True)
class GenerationFinished:
    turn: int
    completion_tokens: int
    finish_reason: str
    seconds: float


@attrs.frozen(slots=True)
class ToolCallFinished:
    turn: int
    tool: str
    call_id: str
    seconds: float
    error: ToolCallError | None


@attrs.frozen(slots=True)
class RolloutFinished:
    turns: int
    stop_reason: StopReason
    error: str | None


LoopEvent: TypeAlias = TurnStarted | GenerationFinished | ToolCallFinished | RolloutFinished


class Observer(Protocol):
    """Receives loop events (progress, logging). Called inline: keep it fast, never block.

    An exception it raises is logged (``hermes_loop.loop``) and never ends the rollout.
    """

    def __call__(self, event: LoopEvent) -> None: ...
