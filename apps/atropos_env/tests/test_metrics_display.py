"""Metrics aggregation and the readable rollout view."""

from __future__ import annotations

from hermes_atropos_env import GroupPolicy, RolloutMetrics, build_group, format_rollout
from hermes_protocols import FailureKind, StopReason, ToolErrorKind
from hermes_protocols.convert import messages_to_openai


def test_metrics_count_everything_and_reset(make_rollout) -> None:
    metrics = RolloutMetrics()
    rollouts = [
        make_rollout(reward=1.0, tool_errors=[ToolErrorKind.INVALID_ARGUMENTS]),
        make_rollout(reward=0.0, stop_reason=StopReason.MAX_TURNS),
        make_rollout(failure=FailureKind.INFRASTRUCTURE),
    ]
    metrics.add(build_group(rollouts, GroupPolicy(group_size=3, max_token_length=100)))
    metrics.add(build_group(rollouts[:2], GroupPolicy(group_size=2, max_token_length=100)))
    snap = metrics.snapshot()
    assert snap["train/rollouts"] == 5
    assert snap["train/groups_sent"] == 1
    assert snap["train/groups_dropped_incomplete"] == 1
    assert snap["train/reward_mean"] == 0.5
    assert snap["train/pass_rate"] == 0.5
    assert snap["train/tool_errors/invalid_arguments"] == 2
    assert snap["train/stop_reason/max_turns"] == 2
    assert snap["train/stop_reason/final_answer"] == 2
    assert snap["train/excluded/infrastructure_failure"] == 1
    assert metrics.snapshot()["train/rollouts"] == 0


def test_rollout_view_shows_reasoning_tool_calls_and_results(make_rollout) -> None:
    rollout = make_rollout()
    text = format_rollout(messages_to_openai(rollout.result.messages), limit=50)
    assert "[ASSISTANT reasoning]\nI should run ls." in text
    assert '[TOOL CALL call_0] terminal({"command": "ls"})' in text
    assert "[TOOL RESULT call_0]\na.txt\nb.txt" in text
    assert "[USER]\nList the files." in text
    long = format_rollout([{"role": "user", "content": "x" * 80}], limit=50)
    assert "30 chars cut" in long
