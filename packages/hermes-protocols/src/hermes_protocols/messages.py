"""Chat messages and tool calls: the conversation as the agent loop sees it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal, TypeAlias

import attrs

from hermes_protocols.errors import ConversionError
from hermes_protocols.json_types import JSONObject

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


@attrs.frozen(slots=True)
class ToolCall:
    """One tool call as it travels in OpenAI messages.

    ``arguments`` is the JSON text exactly as the model (or server) produced it; use
    :meth:`parsed_arguments` to get the object, which raises on malformed JSON instead of
    silently returning ``{}``.
    """

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> JSONObject:
        """Decode ``arguments`` into a JSON object, or raise :class:`ConversionError`."""
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ConversionError(
                f"tool call {self.id!r} ({self.name}): arguments are not valid JSON: {exc}"
            ) from exc
        if not isinstance(value, dict):
            raise ConversionError(
                f"tool call {self.id!r} ({self.name}): arguments must be a JSON object, "
                f"got {type(value).__name__}"
            )
        return value


def _check_message(instance: Message, _attribute: attrs.Attribute[object], _value: object) -> None:
    if instance.role not in ROLES:
        raise ConversionError(f"unknown role {instance.role!r}; expected one of {ROLES}")
    if instance.tool_calls and instance.role != "assistant":
        raise ConversionError(f"only assistant messages carry tool_calls, not {instance.role!r}")
    if instance.role == "tool" and not instance.tool_call_id:
        raise ConversionError("a tool message needs the tool_call_id it answers")
    if instance.reasoning is not None and instance.role != "assistant":
        raise ConversionError(f"only assistant messages carry reasoning, not {instance.role!r}")


def _calls(values: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class Message:
    """A chat message. ``content`` is ``None`` only for assistant turns that only call tools."""

    role: Role = attrs.field(validator=_check_message)
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(
        cls,
        content: str | None,
        tool_calls: tuple[ToolCall, ...] = (),
        reasoning: str | None = None,
    ) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls, reasoning=reasoning)

    @classmethod
    def tool(cls, content: str, tool_call_id: str, name: str | None = None) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)
