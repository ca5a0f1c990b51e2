"""What the model saw and did, as record fields both apps write (hermes-agent's layout).

``tools``: the OpenAI schemas the model was given; ``system_prompt``: the system turn with the
tool list as the Hermes format renders it (the environment's prompt, then the ``<tools>``
block; this is the exact text the model saw when its chat template has no tool support, as
with the embedded SmolLM2, and hermes-agent's representation otherwise); ``conversations``:
ShareGPT turns with that system turn first; ``tool_stats``: calls, successes and failures per
tool; ``toolsets_used``; ``prefill_messages``: how many demonstration messages precede the
task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_loop import hermes_tools_system_prompt
from hermes_protocols import (
    AgentResult,
    ConversionError,
    JSONObject,
    Message,
    ScoredRollout,
    ToolSchema,
)
from hermes_protocols.convert import to_sharegpt, tools_from_openai


def system_prompt(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> str:
    """The system turn the model saw: the prompt's system message, then the tool list."""
    head = messages[0].content if messages and messages[0].role == "system" else None
    block = hermes_tools_system_prompt(tools) if tools else ""
    return "\n\n".join(part for part in (head, block) if part)


def conversations(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> list[JSONObject]:
    """ShareGPT turns (``from``/``value``) with the tool list in the system turn; raises
    :class:`ConversionError` for a message ShareGPT cannot hold unambiguously."""
    turns: list[JSONObject] = [dict(t) for t in to_sharegpt(messages)]
    system = {"from": "system", "value": system_prompt(messages, tools)}
    if turns and turns[0]["from"] == "system":
        turns[0] = system
    elif system["value"]:
        turns.insert(0, system)
    return turns


def tool_stats(result: AgentResult | None) -> dict[str, dict[str, int]]:
    """Per tool name: ``calls`` the model made, ``failures`` (recorded tool errors),
    ``successes``. Only the rollout's own turns count: calls shown in the prompt (a prefill
    demonstration) were not made by the model."""
    stats: dict[str, dict[str, int]] = {}
    if result is None:
        return stats
    generated = [m for m in result.messages if m.role == "assistant"][-result.turns :]
    for message in generated if result.turns else ():
        for call in message.tool_calls:
            entry = stats.setdefault(call.name, {"calls": 0, "successes": 0, "failures": 0})
            entry["calls"] += 1
    for error in result.tool_errors:
        entry = stats.setdefault(error.tool, {"calls": 0, "successes": 0, "failures": 0})
        entry["failures"] += 1
        entry["calls"] = max(entry["calls"], entry["failures"])
    for entry in stats.values():
        entry["successes"] = entry["calls"] - entry["failures"]
    return stats


def prefill_messages(rollout: ScoredRollout) -> int:
    """How many demonstration messages precede the task in ``rollout``'s prompt."""
    workspace = rollout.metadata.get("workspace") or {}
    return int(workspace.get("prefill_messages", 0))


def model_view(rollout: ScoredRollout) -> JSONObject:
    """The record fields above for ``rollout`` (``conversations`` is ``None`` with a
    ``conversations_error`` when a message cannot be written as ShareGPT)."""
    metadata: dict[str, Any] = dict(rollout.metadata)
    tools_json = list(metadata.get("tools") or [])
    schemas = tools_from_openai(tools_json)
    messages = rollout.result.messages if rollout.result is not None else ()
    view: JSONObject = {
        "tools": tools_json,
        "system_prompt": system_prompt(messages, schemas),
        "tool_stats": tool_stats(rollout.result),
        "toolsets_used": list(metadata.get("toolsets") or []),
        "prefill_messages": prefill_messages(rollout),
    }
    try:
        view["conversations"] = conversations(messages, schemas)
    except ConversionError as exc:
        view["conversations"] = None
        view["conversations_error"] = str(exc)
    return view
