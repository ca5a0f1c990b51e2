from __future__ import annotations

from collections.abc import Callable

from hermes_batch_runner.records import rollout_record
from hermes_batch_runner.report import render_report
from hermes_batch_runner.summary import SessionStats, build_summary
from hermes_protocols import ScoredRollout

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


def test_report_escapes_model_output(make_rollout: MakeRollout) -> None:
    record = rollout_record(make_rollout(), record_id="<img src=x>", model="m")
    summary = build_summary(
        expected=1, kept=[record], failed=[], filtered=[], session=SessionStats(1.0, 1, 2)
    )
    page = render_report(title="t<", summary=summary, groups=[("kept", [record])])
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x&gt;" in page
    assert "think &lt;b&gt;hard&lt;/b&gt;" in page
    assert "ls | wc -l" in page
    assert "<title>t&lt;</title>" in page


def test_report_of_a_sample_says_how_many_are_not_shown(make_rollout: MakeRollout) -> None:
    records = [
        rollout_record(make_rollout(f"i{k}"), record_id=f"r{k}", model="m") for k in range(3)
    ]
    summary = build_summary(
        expected=3, kept=records, failed=[], filtered=[], session=SessionStats(1.0, 3, 6)
    )
    page = render_report(title="t", summary=summary, groups=[("kept", records)], limit=2)
    assert page.count("<details>") == 2
    assert "1 more rollouts not shown" in page
    sampled = render_report(title="t", summary=summary, groups=[("kept", records[:1])], total=50)
    assert "49 more rollouts not shown" in sampled
