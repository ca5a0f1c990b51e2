"""A parsed assistant turn -> the assistant message and its validated calls.

Shared by phase 2 (text decoded from the sampler's ids) and phase 1's client-side fallback
(tool calls parsed from a server's ``content``). Calls keep emission order; a malformed call
becomes an invalid call with the parser's reason, never a silent "no call".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hermes_protocols import JSONObject, Message, ParsedTurn, ToolCall, ToolErrorKind, ToolSchema

from hermes_loop.tool_calls import PendingCall, SchemaCache, validate_call

#: ``(turn, index, given id) -> unique id`` (:meth:`hermes_loop.models.CallIds.assign`)
AssignId = Callable[[int, int, str | None], str]


def turn_message(
    parsed: ParsedTurn,
    turn: int,
    assign: AssignId,
    tools: Mapping[str, ToolSchema],
    schemas: SchemaCache,
) -> tuple[Message, tuple[PendingCall, ...]]:
    """The assistant message of ``parsed`` with every call (valid or not) and its check."""
    errors = list(parsed.errors)
    # (name, raw arguments, decoded arguments or None, why invalid, id), in emission order
    found: list[tuple[str, str, JSONObject | None, str | None, str | None]] = []
    for parsed_call in parsed.tool_calls:
        reason = None
        if parsed_call.arguments is None:
            match = next((e for e in errors if e.name in (None, parsed_call.name)), None)
            if match is not None:
                errors.remove(match)
            reason = match.message if match else "arguments are not a valid JSON object"
        found.append(
            (
                parsed_call.name,
                parsed_call.raw_arguments,
                parsed_call.arguments,
                reason,
                parsed_call.id,
            )
        )
    for error in sorted(errors, key=lambda e: e.call_index):
        entry = (
            error.name or "invalid_tool_call",
            error.raw,
            None,
            f"{error.kind}: {error.message}",
            None,
        )
        found.insert(min(max(error.call_index, 0), len(found)), entry)
    calls: list[PendingCall] = []
    for index, (name, raw, arguments, reason, given_id) in enumerate(found):
        call = ToolCall(assign(turn, index, given_id), name, raw)
        if reason is not None or arguments is None:
            calls.append(
                PendingCall(call, None, ToolErrorKind.INVALID_ARGUMENTS, reason or "invalid")
            )
        else:
            calls.append(validate_call(call, tools, schemas, arguments=arguments))
    message = Message.assistant(
        parsed.content, tuple(c.call for c in calls), reasoning=parsed.reasoning
    )
    return message, tuple(calls)
