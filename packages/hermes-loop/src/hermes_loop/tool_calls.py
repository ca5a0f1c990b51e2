"""Validating and running one turn's tool calls.

A call is executed only when its tool exists, its arguments are a JSON object and they satisfy
the tool's JSON schema. Everything else becomes a :class:`ToolCallError` and a tool message that
tells the model what was wrong; the executor never sees it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import anyio
import attrs
import jsonschema  # type: ignore[import-untyped]
from hermes_protocols import (
    ToolCall,
    ToolCallError,
    ToolErrorKind,
    ToolExecutor,
    ToolResult,
    ToolSchema,
)


class ToolHandler(Protocol):
    """Custom per-call hook (hermes-agent's ``tool_handler``): decide how a validated call runs.

    It gets the call, its decoded arguments and the executor, and returns the result the model
    sees; raising is reported as an ``execution_error``.
    """

    async def __call__(
        self, call: ToolCall, arguments: Mapping[str, Any], executor: ToolExecutor
    ) -> ToolResult: ...


@attrs.frozen(slots=True)
class PendingCall:
    """A tool call of the current turn, with its decoded arguments or the reason it is invalid."""

    call: ToolCall
    arguments: Mapping[str, Any] | None
    error_kind: ToolErrorKind | None = None
    error: str | None = None


@attrs.frozen(slots=True)
class CallOutcome:
    call: ToolCall
    result: ToolResult
    error: ToolCallError | None
    seconds: float


class SchemaCache:
    """Compiled JSON-schema validators per tool, reused across rollouts."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[object, Any]] = {}

    def validator(self, tool: ToolSchema) -> Any:
        key = id(tool.parameters)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is tool.parameters:
            return hit[1]
        cls = jsonschema.validators.validator_for(tool.parameters)
        validator = cls(tool.parameters)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (tool.parameters, validator)
        return validator


def validate_call(
    call: ToolCall,
    tools: Mapping[str, ToolSchema],
    schemas: SchemaCache,
    *,
    arguments: Mapping[str, Any] | None = None,
) -> PendingCall:
    """Check a call against the tool list and its schema; ``arguments`` skips JSON decoding."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return PendingCall(
            call, None, ToolErrorKind.UNKNOWN_TOOL, f"unknown tool {call.name!r}; tools: {known}"
        )
    if arguments is None:
        try:
            decoded = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return PendingCall(
                call, None, ToolErrorKind.INVALID_ARGUMENTS, f"arguments are not valid JSON: {exc}"
            )
        if not isinstance(decoded, dict):
            return PendingCall(
                call,
                None,
                ToolErrorKind.INVALID_ARGUMENTS,
                f"arguments must be a JSON object, got {type(decoded).__name__}",
            )
        arguments = decoded
    error = jsonschema.exceptions.best_match(schemas.validator(tool).iter_errors(arguments))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        return PendingCall(
            call,
            None,
            ToolErrorKind.SCHEMA_VIOLATION,
            f"arguments violate the schema of {call.name!r} at {where}: {error.message}",
        )
    return PendingCall(call, arguments)


def _failure(pending: PendingCall, turn: int, kind: ToolErrorKind, message: str) -> CallOutcome:
    error = ToolCallError(
        kind=kind,
        turn=turn,
        tool=pending.call.name,
        arguments=pending.call.arguments,
        message=message,
    )
    text = f"Error ({kind.value}) calling {pending.call.name!r}: {message}"
    return CallOutcome(pending.call, ToolResult(content=text, is_error=True), error, 0.0)


async def run_call(
    pending: PendingCall,
    *,
    turn: int,
    executor: ToolExecutor,
    handler: ToolHandler | None,
    timeout: float | None,
) -> CallOutcome:
    """Run one call (if valid) under its timeout; every failure becomes an outcome."""
    if pending.arguments is None:
        kind = pending.error_kind or ToolErrorKind.INVALID_ARGUMENTS
        return _failure(pending, turn, kind, pending.error or "invalid call")
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            if handler is not None:
                result = await handler(pending.call, pending.arguments, executor)
            else:
                result = await executor(pending.call.name, pending.arguments)
    except TimeoutError:
        return _failure(pending, turn, ToolErrorKind.TIMEOUT, f"timed out after {timeout} s")
    except Exception as exc:
        return _failure(
            pending, turn, ToolErrorKind.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}"
        )
    return CallOutcome(pending.call, result, None, time.perf_counter() - started)


async def run_calls(
    calls: Sequence[PendingCall],
    *,
    turn: int,
    executor: ToolExecutor,
    handler: ToolHandler | None,
    timeout: float | None,
    concurrent: bool,
) -> list[CallOutcome]:
    """Run a turn's calls, concurrently (task group) or one by one; results in call order."""
    if not concurrent or len(calls) < 2:
        return [
            await run_call(c, turn=turn, executor=executor, handler=handler, timeout=timeout)
            for c in calls
        ]
    outcomes: list[CallOutcome | None] = [None] * len(calls)

    async def one(index: int) -> None:
        outcomes[index] = await run_call(
            calls[index], turn=turn, executor=executor, handler=handler, timeout=timeout
        )

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    return [o for o in outcomes if o is not None]
