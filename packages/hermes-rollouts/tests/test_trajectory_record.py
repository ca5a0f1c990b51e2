"""The record boundary: plain JSON only, anything else refused naming the environment and key."""

from __future__ import annotations

import json

import pytest
from hermes_protocols import AgentResult, Item, Message, Score, ScoredRollout, StopReason
from hermes_rollouts import RecordError, encode_record, rollout_record


def _rollout(workspace: dict[str, object]) -> ScoredRollout:
    result = AgentResult(
        messages=[Message.user("do it"), Message.assistant("done")],
        stop_reason=StopReason.FINAL_ANSWER,
        turns=1,
    )
    return ScoredRollout(
        id="my_env/a/0",
        env="my_env",
        item=Item(id="a", data={"n": 1}),
        group_index=0,
        result=result,
        score=Score(reward=1.0),
        metadata={"toolsets": ["terminal"], "workspace": workspace},
    )


def test_a_plain_json_record_round_trips() -> None:
    record = rollout_record(_rollout({"files": ["a.txt"]}), record_id="my_env/a/0", model="m")
    line = encode_record(record)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == record


def test_bytes_in_setup_metadata_are_refused_naming_environment_and_key() -> None:
    rollout = _rollout({"test_files": {"tests/test_x.py": b"def test(): pass\n"}})
    record = rollout_record(rollout, record_id="my_env/a/0", model="m")
    with pytest.raises(RecordError) as caught:
        encode_record(record)
    message = str(caught.value)
    assert "\n" not in message
    assert "environment 'my_env'" in message
    assert "record.metadata.workspace.test_files['tests/test_x.py']: bytes" in message
