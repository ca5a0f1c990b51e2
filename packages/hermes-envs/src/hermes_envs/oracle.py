"""Environments that know a solution per item, and the two scripted agents that check one: the
oracle (runs the solution through the ``terminal`` tool) and the do-nothing agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from hermes_protocols import (
    AgentResult,
    Item,
    Message,
    StopReason,
    ToolCall,
    ToolExecutor,
    ToolSchema,
)

#: the tool (and its argument) a scripted agent runs its script with
TERMINAL_TOOL = "terminal"


@runtime_checkable
class HasOracle(Protocol):
    """``oracle_solution(item)`` is a bash script that, run in the workspace after setup,
    makes ``verify`` return 1.0 (used by tests, sanity checks and reward audits)."""

    def oracle_solution(self, item: Item) -> str: ...


class ScriptAgent:
    """An :class:`~hermes_protocols.Agent` that runs one bash script with the ``terminal``
    tool (``timeout_s`` seconds) and answers "done"; ``output`` keeps what the script printed."""

    def __init__(self, script: str, *, timeout_s: float = 600.0) -> None:
        self.script = script
        self.timeout_s = timeout_s
        self.output = ""

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        arguments = {"command": self.script, "timeout": int(self.timeout_s)}
        result = await executor(TERMINAL_TOOL, arguments)
        self.output = result.content
        call = ToolCall("call_0", TERMINAL_TOOL, json.dumps(arguments))
        return AgentResult(
            messages=[
                *messages,
                Message.assistant(None, (call,)),
                Message.tool(result.content, "call_0", TERMINAL_TOOL),
                Message.assistant("done"),
            ],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=2,
        )


class IdleAgent:
    """An :class:`~hermes_protocols.Agent` that does nothing and answers at once."""

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        return AgentResult(
            messages=[*messages, Message.assistant("I did nothing.")],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=1,
        )
