from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hermes_batch_runner.app import write_outputs
from hermes_batch_runner.summary import SessionStats, build_summary
from hermes_protocols import ScoredRollout
from hermes_protocols.formats import RunDirectory
from hermes_rollouts import rollout_record

MakeRollout = Callable[..., ScoredRollout]


def test_summary_counts_rewards_tokens_and_tool_errors(make_rollout: MakeRollout) -> None:
    kept = [
        rollout_record(make_rollout("a", reward=1.0), record_id="a", model="m"),
        rollout_record(make_rollout("b", reward=0.0), record_id="b", model="m"),
    ]
    failed = [rollout_record(make_rollout("c", reward=None), record_id="c", model="m")]
    filtered = [{**rollout_record(make_rollout("d", reward=0.5), record_id="d", model="m")}]
    filtered[0]["filter_reason"] = "min_reward"
    summary = build_summary(
        expected=5,
        kept=kept,
        failed=failed,
        filtered=filtered,
        session=SessionStats(wall_s=30.0, rollouts=4, generated_tokens=6),
    )
    counts = summary["counts"]
    assert counts == {
        "expected": 5,
        "finished": 4,
        "remaining": 1,
        "kept": 2,
        "failed": 1,
        "filtered": 1,
        "failed_by_reason": {"infrastructure:acquire": 1},
        "filtered_by_reason": {"min_reward": 1},
        "stop_reasons": {"final_answer": 3},
    }
    assert summary["complete"] is False
    assert summary["reward"]["mean"] == 0.5
    assert summary["reward"]["pass_rate"] == 1 / 3
    assert summary["tokens"]["generated"] == 6  # two trainable tokens per rollout
    assert summary["tool_errors"]["by_kind"] == {"invalid_arguments": 3}
    assert summary["tool_errors"]["rate_per_call"] == 1.0
    assert summary["session"]["rollouts_per_min"] == 8.0


def test_outputs_report_every_log_with_model_text_escaped(
    tmp_path: Path, make_rollout: MakeRollout
) -> None:
    paths = RunDirectory(tmp_path)
    kept = rollout_record(
        make_rollout("a"), record_id="</script><img src=x onerror=alert(1)>", model="m"
    )
    failed = rollout_record(make_rollout("c", reward=None), record_id="c", model="m")
    for path, record in ((paths.trajectories, kept), (paths.failed, failed)):
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    paths.filtered.write_text("", encoding="utf-8")
    summary = write_outputs(paths, expected=3, session=SessionStats(1.0, 2, 2), title="t<")
    assert summary["counts"]["finished"] == 2
    page = paths.report.read_text(encoding="utf-8")
    assert "<title>t&lt;</title>" in page
    assert "<img" not in page  # ids and messages are JSON with < escaped, rendered as text
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in page
    assert page.count('<script type="application/json" id="d') == 2
    assert '"st":"failed"' in page
