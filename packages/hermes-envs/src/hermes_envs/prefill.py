"""Few-shot prefill: demonstration messages put before every task (``--prefill-messages``).

A prefill file is a JSON list of OpenAI chat messages (``role``/``content``, and for a
demonstrated tool call ``tool_calls`` / ``tool_call_id``), as hermes-agent's batch runner reads
it. The messages go after the system prompt and before the task, so they are part of the
prompt tokens (never trainable); records mark how many there were.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
from hermes_protocols import ConversionError, Environment, Item, Message, Slot
from hermes_protocols.convert import messages_from_openai

from hermes_envs._wrapped import WrappedEnvironment
from hermes_envs.errors import DatasetError

#: roles a demonstration may hold (a system message stays the environment's own)
_ROLES = frozenset({"user", "assistant", "tool"})


def load_prefill(path: str | Path) -> tuple[Message, ...]:
    """Read and check a prefill file; :class:`DatasetError` names the file and what to fix."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"cannot read prefill file {source}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(f"prefill file {source} is not JSON: {exc}") from exc
    return parse_prefill(data, where=str(source))


def parse_prefill(data: object, *, where: str) -> tuple[Message, ...]:
    """Check decoded prefill JSON: a non-empty list of user/assistant/tool messages."""
    if not isinstance(data, list) or not data:
        raise DatasetError(f"prefill {where} must be a non-empty JSON list of chat messages")
    for index, entry in enumerate(data):
        role = entry.get("role") if isinstance(entry, Mapping) else None
        if role not in _ROLES:
            raise DatasetError(
                f"prefill {where}: message {index} must be an object whose role is one of "
                f"{sorted(_ROLES)} (got {role!r}); the system prompt comes from the environment"
            )
    try:
        messages = messages_from_openai(data)
    except ConversionError as exc:
        raise DatasetError(f"prefill {where}: {exc}") from exc
    _check_tool_results(messages, where)
    return tuple(messages)


def _check_tool_results(messages: Sequence[Message], where: str) -> None:
    """Every tool message answers a call of an earlier assistant message."""
    called: set[str] = set()
    for index, message in enumerate(messages):
        called.update(call.id for call in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in called:
            raise DatasetError(
                f"prefill {where}: tool message {index} answers call id "
                f"{message.tool_call_id!r}, which no earlier assistant message made"
            )


def demonstration_path(name: str) -> Path:
    """A demonstration shipped with hermes-envs (``terminal``: two solved terminal tasks;
    ``write_word``: two solved tasks of endless_terminals' ``write_word`` family)."""
    found = resources.files("hermes_envs").joinpath("data", "prefill", f"{name}.json")
    if not found.is_file():
        raise DatasetError(f"no shipped demonstration named {name!r}")
    return Path(str(found))


@attrs.frozen(slots=True)
class PrefilledEnvironment(WrappedEnvironment):
    """``inner`` with ``prefill`` inserted after its system message(s), before the task."""

    prefill: tuple[Message, ...]

    def prompt(self, item: Item) -> Sequence[Message]:
        messages = list(self.inner.prompt(item))
        head = 0
        while head < len(messages) and messages[head].role == "system":
            head += 1
        return [*messages[:head], *self.prefill, *messages[head:]]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        """``inner``'s setup; its metadata also says how many prefill messages the prompt
        holds (records carry it, so demonstrations are never mistaken for the rollout)."""
        metadata = await self.inner.setup_workspace(item, slot)
        return {**metadata, "prefill_messages": len(self.prefill)}


def with_prefill(environment: Environment, prefill: Sequence[Message]) -> Environment:
    """``environment`` itself when ``prefill`` is empty, else the prefilled wrapper."""
    if not prefill:
        return environment
    return PrefilledEnvironment(environment, tuple(prefill))
