from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hermes_report import ReportSourceError, records_from, render_report
from hermes_report.model import tool_stats

GROUP = {
    "tokens": [[1, 2, 3], [1, 4]],
    "masks": [[-100, 2, 3], [-100, 4]],
    "scores": [1.0, 0.0],
    "inference_logprobs": [[1.0, -0.1, -0.2], [1.0, -0.3]],
    "messages": [[{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}]],
    "group_overrides": {"token_source": "sampler", "environment": "env", "item_id": "it"},
}


def test_atropos_groups_become_one_record_per_member(tmp_path: Path) -> None:
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps(GROUP) + "\n" + json.dumps(GROUP) + "\n")
    records = list(records_from(path))
    assert len(records) == 4
    first = records[0]
    assert first["id"] == "env/it/0"
    assert first["masks"] == [0, 1, 1]
    assert first["logprobs"] == [None, -0.1, -0.2]  # atroposlib's 1.0 filler is not a logprob
    assert first["reward"] == 1.0
    assert first["token_source"] == "sampler"
    assert records[1]["messages"][0]["content"] == "b"


def test_run_directory_statuses_and_a_torn_last_line(tmp_path: Path) -> None:
    (tmp_path / "trajectories.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "rew')
    (tmp_path / "failed.jsonl").write_text('{"id": "d", "failure": {"kind": "x"}}\n')
    records = list(records_from(tmp_path))
    assert [(r["id"], r["status"]) for r in records] == [
        ("a", "kept"), ("b", "kept"), ("d", "failed"),
    ]  # fmt: skip


def test_a_directory_without_logs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReportSourceError, match="not a run directory"):
        records_from(tmp_path)
    with pytest.raises(ReportSourceError, match="does not exist"):
        records_from(tmp_path / "missing.jsonl")


def test_a_groups_demonstration_calls_are_not_the_models(tmp_path: Path) -> None:
    call = {"id": "d", "function": {"name": "terminal", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": None, "tool_calls": [call, call]},
        {"role": "tool", "content": "ok", "tool_call_id": "d", "name": "terminal"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    overrides = {**GROUP["group_overrides"], "prefill_messages": 2}  # type: ignore[dict-item]
    group = {**GROUP, "messages": [messages, messages], "group_overrides": overrides}
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps(group) + "\n")
    records = list(records_from(path))
    assert [tool_stats(r) for r in records] == [{"terminal": (1, 0)}] * 2
    # a group does not say which calls failed: the report says so rather than "0 failed"
    page = render_report(records)
    assert "terminal: 2 calls, failures not recorded" in page
    assert re.search(r'data-count="tool_failures">failures not recorded<', page)
