"""Validating and running one turn's tool calls.

A call is executed only when its tool exists, its arguments are a JSON object and they satisfy
the tool's JSON schema. Everything else becomes a :class:`ToolCallError` and a tool message that
tells the model what was wrong; the executor never sees it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import attrs
import jsonschema  # type: ignore[import-untyped]
from hermes_protocols import (
    HermesError,
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


_SIMPLE_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
_ANNOTATIONS = {"description", "title", "default", "examples"}


def _fast_checker(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """A quick acceptor for the common flat tool schema (typed properties, required,
    additionalProperties), or None when the schema uses anything else. It only ever *accepts*
    what jsonschema accepts; anything it rejects is re-checked by jsonschema for the message."""
    if set(schema) - {"type", "properties", "required", "additionalProperties", *_ANNOTATIONS}:
        return None
    if schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, dict)
        or not isinstance(required, list)
        or extra
        not in (
            True,
            False,
        )
    ):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or set(sub) - {"type", *_ANNOTATIONS}:
            return None
        kind = sub.get("type")
        if kind is None:
            checks[name] = lambda _v: True
        elif isinstance(kind, str) and kind in _SIMPLE_TYPES:
            checks[name] = _SIMPLE_TYPES[kind]
        else:
            return None
    needed = tuple(required)

    def accept(arguments: Mapping[str, Any]) -> bool:
        for key in needed:
            if key not in arguments:
                return False
        for key, value in arguments.items():
            check = checks.get(key)
            if check is None:
                if not extra:
                    return False
            elif not check(value):
                return False
        return True

    return accept


class SchemaCache:
    """Compiled JSON-schema validators (and fast acceptors) per tool, reused across rollouts."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[object, Any, Callable[[Mapping[str, Any]], bool] | None]] = {}

    def _entry(self, tool: ToolSchema) -> tuple[Any, Callable[[Mapping[str, Any]], bool] | None]:
        key = id(tool.parameters)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is tool.parameters:
            return hit[1], hit[2]
        cls = jsonschema.validators.validator_for(tool.parameters)
        validator = cls(tool.parameters)
        fast = _fast_checker(tool.parameters)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (tool.parameters, validator, fast)
        return validator, fast

    def validator(self, tool: ToolSchema) -> Any:
        """The jsonschema validator for the tool's parameters."""
        return self._entry(tool)[0]

    def first_error(self, tool: ToolSchema, arguments: Mapping[str, Any]) -> Any:
        """The most relevant schema violation, or None when the arguments are valid."""
        validator, fast = self._entry(tool)
        if fast is not None and fast(arguments):
            return None
        return jsonschema.exceptions.best_match(validator.iter_errors(arguments))


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
    error = schemas.first_error(tool, arguments)
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
    deadline = math.inf if timeout is None else anyio.current_time() + timeout
    try:
        with anyio.CancelScope(deadline=deadline) as scope:
            if handler is not None:
                result = await handler(pending.call, pending.arguments, executor)
            else:
                result = await executor(pending.call.name, pending.arguments)
    except TimeoutError as exc:  # the tool's own timeout (e.g. a sandbox command)
        return _failure(pending, turn, ToolErrorKind.TIMEOUT, f"{type(exc).__name__}: {exc}")
    except (HermesError, OSError) as exc:  # a tool's or sandbox's failure; a bug raises
        return _failure(
            pending, turn, ToolErrorKind.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}"
        )
    if scope.cancelled_caught:
        return _failure(pending, turn, ToolErrorKind.TIMEOUT, f"timed out after {timeout} s")
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
