"""Record fields: tool statistics count only the calls the model made."""

from __future__ import annotations

from hermes_protocols import AgentResult, Message, StopReason, ToolCall
from hermes_rollouts.records import tool_stats


def _call(call_id: str, name: str = "terminal") -> Message:
    return Message.assistant(None, (ToolCall(call_id, name, '{"command": "ls"}'),))


def test_demonstrated_calls_in_the_prompt_are_not_the_models() -> None:
    prompt = [
        Message.system("sys"),
        Message.user("demo task"),
        _call("demo-1"),
        Message.tool("{}", "demo-1"),
        Message.assistant("demo done"),
        Message.user("the task"),
    ]
    generated = [_call("c1"), Message.tool("{}", "c1"), _call("c2"), Message.tool("{}", "c2")]
    result = AgentResult(
        messages=[*prompt, *generated, Message.assistant("done")],
        stop_reason=StopReason.FINAL_ANSWER,
        turns=3,
    )
    assert tool_stats(result) == {"terminal": {"calls": 2, "successes": 2, "failures": 0}}


def test_no_turn_no_call() -> None:
    result = AgentResult(
        messages=[Message.user("x"), _call("d")], stop_reason=StopReason.CANCELLED, turns=0
    )
    assert tool_stats(result) == {}
