from __future__ import annotations

import json

from hermes_report.model import (
    detail,
    end_positions,
    row,
    status_of,
    to_json,
    token_track,
    tool_stats,
)
from hypothesis import given
from hypothesis import strategies as st


def _record(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": "env/item/0",
        "item": {"id": "item", "data": {"family": "grep", "difficulty": 2}},
        "reward": 1.0,
        "stop_reason": "final_answer",
        "turns": 2,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "terminal", "arguments": "{}"}},
                    {"id": "c2", "function": {"name": "read_file", "arguments": "{}"}},
                ],
            },
        ],
        "tool_errors": [{"kind": "invalid_arguments", "tool": "terminal", "turn": 1}],
        "tokens": [5, 6, 7, 8, 9, 10],
        "masks": [0, 0, 1, 1, 0, 1],
        "logprobs": [0.0, 0.0, -0.5, None, 0.0, -3.25],
        "token_source": "sampler",
        "drift": {"mismatches": 1, "positions": [4, 99]},
    }
    base.update(extra)
    return base


def test_token_track_aligns_masks_and_drops_masked_logprobs() -> None:
    track = token_track(_record())
    assert track is not None
    assert track.mask == [0, 0, 1, 1, 0, 1]
    assert track.trainable == 3
    assert track.logprobs == [None, None, -0.5, None, None, -3.25]  # a missing one stays None
    assert track.drift_positions == [4]  # out-of-range positions are dropped
    assert end_positions(track, frozenset({5})) == [0, 3, 5]  # special id 5, two turn ends


def test_phase_one_record_has_no_tokens() -> None:
    record = _record(tokens=None, masks=None, logprobs=None, token_source=None)
    assert token_track(record) is None
    entry = row(0, record, None)
    assert entry["ntok"] is None
    assert entry["src"] is None
    assert "tok" not in detail(record, None, frozenset())


def test_row_counts_calls_errors_family_and_drift() -> None:
    record = _record()
    entry = row(3, record, token_track(record))
    assert entry["i"] == 3
    assert (entry["st"], entry["r"], entry["stop"]) == ("kept", 1.0, "final_answer")
    assert (entry["fam"], entry["dif"]) == ("grep", "2")
    assert (entry["tc"], entry["te"], entry["ntok"], entry["gen"], entry["drift"]) == (
        2, 1, 6, 3, 1,
    )  # fmt: skip


def test_family_and_difficulty_from_the_workspace_metadata() -> None:
    record = _record(item={"id": "x"}, metadata={"workspace": {"family": "f", "difficulty": 1}})
    entry = row(0, record, None)
    assert (entry["fam"], entry["dif"]) == ("f", "1")


def test_status_from_failure_filter_or_explicit() -> None:
    assert status_of({"failure": {"kind": "infrastructure"}}) == "failed"
    assert status_of({"filter_reason": "min_reward"}) == "filtered"
    assert status_of({"status": "failed"}) == "failed"
    assert status_of({}) == "kept"


def test_detail_keeps_new_fields_when_present() -> None:
    record = _record(tools=[{"function": {"name": "terminal"}}], logprob_mode="sampled")
    out = detail(record, token_track(record), frozenset())
    assert out["tools"] == [{"function": {"name": "terminal"}}]
    assert out["logprob_mode"] == "sampled"
    assert out["tok"]["mask"] == "001101"
    assert out["tok"]["lp"] == [-0.5, None, -3.25]  # trainable positions only
    assert "tool_stats" not in out


@given(st.text())
def test_embedded_json_round_trips_and_cannot_close_a_script(text: str) -> None:
    encoded = to_json({"t": text})
    assert "<" not in encoded
    assert ">" not in encoded
    assert "&" not in encoded
    assert json.loads(encoded) == {"t": text}


def _demonstrated(**extra: object) -> dict[str, object]:
    """A record whose prompt holds a demonstration (two prefilled messages with a call)."""
    call = {"id": "d1", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
    own = {"id": "c1", "function": {"name": "terminal", "arguments": "{"}}
    return _record(
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "assistant", "content": None, "tool_calls": [call, call]},
            {"role": "tool", "content": "ok", "tool_call_id": "d1", "name": "terminal"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [own]},
        ],
        prefill_messages=2,
        tool_errors=[{"kind": "invalid_arguments", "tool": "terminal", "turn": 1}],
        timings={"turns": [{"turn": 1, "finish_reason": "stop"}]},
        **extra,
    )


def test_a_demonstrations_calls_are_not_counted_as_the_models() -> None:
    record = _demonstrated()
    assert tool_stats(record) == {"terminal": (1, 1)}
    entry = row(0, record, None)
    assert (entry["tc"], entry["te"]) == (1, 1)
    assert detail(record, None, frozenset())["demo"] == [1, 3]


def test_the_records_own_tool_stats_win() -> None:
    stats = {"terminal": {"calls": 3, "successes": 1, "failures": 2}}
    assert tool_stats(_demonstrated(tool_stats=stats)) == {"terminal": (3, 2)}


def test_a_tool_error_says_how_its_turn_ended() -> None:
    (error,) = detail(_demonstrated(), None, frozenset())["tool_errors"]
    assert error["turn_end"] == "stop"  # the model sampled its end token: nothing was cut
