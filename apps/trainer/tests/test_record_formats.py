"""The two record formats, each written by its real writer (the batch runner's
``rollout_record``, the Atropos env's ``build_group``), read back by the report and by the
trainer through :mod:`hermes_protocols.formats`: both readers see the same tokens, masks,
logprobs, rewards and temperature for the same rollouts; another format version is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hermes_atropos_env import GroupPolicy, build_group
from hermes_protocols import AgentResult, Item, Message, Score, ScoredRollout, StopReason
from hermes_protocols.formats import FORMAT_KEY, FormatVersionError, RunDirectory
from hermes_protocols.tokens import TokenTrace
from hermes_report import atropos_records, records_from
from hermes_rollouts import encode_record, rollout_record
from hermes_trainer.samples import from_atropos_group, from_trajectory
from hermes_trainer.trajectories import read_groups

SAMPLING = {"temperature": 0.6, "missing_logprobs": []}


def _rollout(
    index: int, generated: list[int], logprobs: list[float], reward: float
) -> ScoredRollout:
    trace = (
        TokenTrace(logprob_mode="sampled")
        .append_context([1, 2, 3])
        .append_generated(generated, logprobs)
        .append_context([9])
    )
    result = AgentResult(
        messages=[Message.user("Write the word cat to a.txt."), Message.assistant("done")],
        stop_reason=StopReason.FINAL_ANSWER,
        turns=1,
        trace=trace,
        metadata={"sampling": {**SAMPLING, "seed": index}},
    )
    return ScoredRollout(
        id=f"endless_terminals/item-7/{index}",
        env="endless_terminals",
        item=Item(id="item-7", data={"word": "cat"}),
        group_index=index,
        result=result,
        score=Score(reward=reward),
    )


ROLLOUTS = (
    _rollout(0, [40, 41, 42], [-0.5, -0.25, -1.5], 1.0),
    _rollout(1, [43, 44], [-2.0, -0.125], 0.0),
)


def _run_dir(root: Path) -> RunDirectory:
    run = RunDirectory(root)
    lines = [
        encode_record(rollout_record(r, record_id=r.id, model="embedded:SmolLM2")) for r in ROLLOUTS
    ]
    run.trajectories.write_bytes(b"".join(lines))
    return run


def _group_file(path: Path) -> Path:
    outcome = build_group(ROLLOUTS, GroupPolicy(group_size=2, max_token_length=100))
    assert outcome.group is not None
    path.write_text(json.dumps(outcome.group) + "\n")
    return path


def _expected(rollout: ScoredRollout) -> tuple[list[int], list[int], list[float | None]]:
    assert rollout.result is not None
    trace = rollout.result.trace
    assert trace is not None
    return (
        list(trace.ids),
        list(trace.mask),
        [lp if m else None for lp, m in zip(trace.logprobs, trace.mask, strict=True)],
    )


def test_the_report_and_the_trainer_read_both_formats_alike(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    groups = tmp_path / "groups.jsonl"
    _group_file(groups)
    group_json = json.loads(groups.read_text())
    report_views = {
        "trajectory": list(records_from(run.root)),
        "atropos": list(atropos_records(groups)),
    }
    (trajectory_group,) = read_groups([run.root], "SmolLM2")
    trainer_views = {
        "trajectory": list(trajectory_group),
        "atropos": from_atropos_group(group_json, "groups.jsonl line 1"),
    }
    for kind in ("trajectory", "atropos"):
        records, samples = report_views[kind], trainer_views[kind]
        assert len(records) == len(samples) == len(ROLLOUTS)
        for rollout, record, sample in zip(ROLLOUTS, records, samples, strict=True):
            ids, mask, logprobs = _expected(rollout)
            assert rollout.score is not None
            # the report (its masks are 0/1, its logprobs None where not trained)
            assert (record["tokens"], record["masks"]) == (ids, mask), kind
            assert [
                lp if m else None for lp, m in zip(record["logprobs"], mask, strict=True)
            ] == logprobs
            assert record["reward"] == rollout.score.reward
            # the trainer
            assert (list(sample.ids), list(sample.mask)) == (ids, mask), kind
            assert list(sample.logprobs) == [0.0 if lp is None else lp for lp in logprobs]
            assert (sample.reward, sample.temperature) == (rollout.score.reward, 0.6)


def test_a_record_of_another_format_version_is_refused_in_one_line(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    record = json.loads(run.trajectories.read_text().splitlines()[0])
    assert record[FORMAT_KEY] == 1
    newer = {**record, FORMAT_KEY: 2}
    run.trajectories.write_text(json.dumps(newer) + "\n")
    for read in (
        lambda: list(records_from(run.root)),
        lambda: read_groups([run.root], "SmolLM2"),
        lambda: from_trajectory(newer),
    ):
        with pytest.raises(
            FormatVersionError, match="format version 2; this hermes-rl reads version 1"
        ) as caught:
            read()
        assert "\n" not in str(caught.value)

    group = json.loads(_group_file(tmp_path / "groups.jsonl").read_text())
    assert group["group_overrides"][FORMAT_KEY] == 1
    group["group_overrides"][FORMAT_KEY] = 2
    (tmp_path / "newer.jsonl").write_text(json.dumps(group) + "\n")
    with pytest.raises(FormatVersionError, match="Atropos group of format version 2"):
        list(atropos_records(tmp_path / "newer.jsonl"))
    with pytest.raises(FormatVersionError, match="Atropos group of format version 2"):
        from_atropos_group(group, "run-api group 0")


def test_records_written_before_the_version_field_read_as_version_1(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    old = [json.loads(line) for line in run.trajectories.read_text().splitlines()]
    for record in old:
        del record[FORMAT_KEY]
    run.trajectories.write_text("".join(json.dumps(r) + "\n" for r in old))
    assert [r["tokens"] for r in records_from(run.root)] == [_expected(r)[0] for r in ROLLOUTS]
    assert len(read_groups([run.root], "SmolLM2")[0]) == 2
