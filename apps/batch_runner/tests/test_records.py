from __future__ import annotations

import math
from collections.abc import Callable

import attrs
from hermes_batch_runner.filters import WriteFilters
from hermes_protocols import Score, ScoredRollout
from hermes_protocols.convert import from_sharegpt, messages_from_openai
from hermes_rollouts import rollout_id, rollout_record

MakeRollout = Callable[..., ScoredRollout]

DOCUMENTED = {
    "id", "env", "item", "messages", "conversations", "reward", "metrics", "stop_reason",
    "tool_errors", "turns", "timings", "model", "tokens", "masks", "logprobs",
}  # fmt: skip


def test_a_scored_rollout_has_every_documented_field(make_rollout: MakeRollout) -> None:
    rollout = make_rollout("it", 1)
    record = rollout_record(rollout, record_id=rollout_id("fake", "it", 1), model="m")
    assert set(record) >= DOCUMENTED
    assert record["id"] == "fake/it/1"
    assert rollout.result is not None
    assert messages_from_openai(record["messages"]) == list(rollout.result.messages)
    assert from_sharegpt(record["conversations"]) == messages_from_openai(record["messages"])
    assert record["conversations"][2]["from"] == "gpt"
    assert record["tokens"] == [1, 2, 3, 4]
    assert record["masks"] == [0, 1, 0, 1]
    assert record["reward"] == 1.0
    assert record["stop_reason"] == "final_answer"
    assert record["tool_errors"][0]["kind"] == "invalid_arguments"
    assert record["timings"]["turns"][0]["completion_tokens"] == 5
    assert record["reasoning"][0] == "think <b>hard</b>"
    assert record["failure"] is None


def test_chat_mode_rollouts_have_no_token_fields(make_rollout: MakeRollout) -> None:
    record = rollout_record(make_rollout(trace=False), record_id="x", model="m")
    assert "tokens" not in record
    assert "masks" not in record


def test_failed_rollouts_carry_the_reason_and_no_reward(make_rollout: MakeRollout) -> None:
    record = rollout_record(make_rollout(reward=None), record_id="x", model="m")
    assert record["reward"] is None
    assert record["failure"] == {
        "kind": "infrastructure",
        "phase": "acquire",
        "message": "no slot",
        "attempts": 3,
    }


def test_non_finite_values_become_null(make_rollout: MakeRollout) -> None:
    rollout = attrs.evolve(make_rollout(), score=Score(reward=math.nan, metrics={"x": math.inf}))
    record = rollout_record(rollout, record_id="x", model="m")
    assert record["reward"] is None
    assert record["metrics"] == {"x": None}


def test_filters_name_their_reason(make_rollout: MakeRollout) -> None:
    with_reasoning = rollout_record(make_rollout(reward=0.5), record_id="a", model="m")
    without = rollout_record(make_rollout(reasoning=None), record_id="b", model="m")
    assert WriteFilters().reason(without) is None
    assert WriteFilters(require_reasoning=True).reason(without) == "no_reasoning"
    assert WriteFilters(require_reasoning=True).reason(with_reasoning) is None
    assert WriteFilters(min_reward=0.6).reason(with_reasoning) == "min_reward"
    assert WriteFilters(min_reward=0.5).reason(with_reasoning) is None


def test_records_carry_what_the_model_saw(make_rollout: MakeRollout) -> None:
    from hermes_protocols import ToolSchema
    from hermes_protocols.convert import tools_to_openai

    terminal = ToolSchema(
        name="terminal",
        description="Run a shell command.",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}},
    )
    rollout = attrs.evolve(
        make_rollout("it", 0),
        metadata={
            "tools": tools_to_openai([terminal]),
            "toolsets": ["terminal"],
            "workspace": {"prefill_messages": 2},
        },
    )
    record = rollout_record(rollout, record_id="fake/it/0", model="m")
    assert record["tools"] == tools_to_openai([terminal])
    assert record["toolsets_used"] == ["terminal"]
    assert record["prefill_messages"] == 2
    system = record["conversations"][0]
    assert system["from"] == "system"
    assert system["value"] == record["system_prompt"]
    assert system["value"].startswith("You are an agent.\n\n")
    assert '<tools> {"type": "function", "function": {"name": "terminal"' in system["value"]
    # one call whose arguments were invalid JSON (a recorded tool error), as the fixture has
    assert record["tool_stats"] == {"terminal": {"calls": 1, "successes": 0, "failures": 1}}
