from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hermes_batch_runner.errors import BatchRunnerError, CorruptLogError
from hermes_batch_runner.jsonl_log import (
    JsonlLog,
    RunLock,
    iter_records,
    read_records,
    recover_log,
)
from hermes_rollouts import RecordError, encode_record
from hypothesis import given, settings
from hypothesis import strategies as st

records_strategy = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(min_size=1, max_size=8)},
        optional={"value": st.text(max_size=30), "n": st.integers()},
    ),
    max_size=8,
    unique_by=lambda r: r["id"],
)


@pytest.mark.anyio
async def test_appended_records_are_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    async with JsonlLog(path) as log:
        for i in range(5):
            await log.append({"id": f"r{i}", "text": 'é\n"quoted"'})
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["id"] for line in lines[:-1]] == [f"r{i}" for i in range(5)]
    assert recover_log(path).ids == {f"r{i}" for i in range(5)}


@given(records=records_strategy, cut=st.integers(min_value=0))
@settings(max_examples=200)
def test_recovery_keeps_exactly_the_complete_records(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, object]], cut: int
) -> None:
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    data = b"".join(encode_record(r) for r in records)
    cut = cut % (len(data) + 1)
    path.write_bytes(data[:cut])  # a crash leaves a prefix of what was written
    recovery = recover_log(path)
    survivors = []
    offset = 0
    for record in records:
        offset += len(encode_record(record))
        if offset <= cut:
            survivors.append(record["id"])
    assert recovery.ids == set(survivors)
    repaired = path.read_bytes()
    assert repaired == b"".join(encode_record(r) for r in records[: len(survivors)])
    assert [r["id"] for r in read_records(path)] == survivors


def test_a_torn_line_that_happens_to_end_with_newline_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"id": "a"}) + b'{"id": "b", "x\n')
    recovery = recover_log(path)
    assert recovery.ids == {"a"}
    assert recovery.dropped_bytes > 0
    assert path.read_bytes() == encode_record({"id": "a"})


def test_invalid_line_in_the_middle_is_corruption_with_line_number(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"id": "a"}) + b"garbage\n" + encode_record({"id": "c"}))
    with pytest.raises(CorruptLogError, match=":2:"):
        recover_log(path)


def test_duplicate_ids_are_corruption(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"id": "a"}) * 2)
    with pytest.raises(CorruptLogError, match="twice"):
        recover_log(path)


def test_records_must_be_strict_json() -> None:
    with pytest.raises(RecordError, match=r"record\.reward: nan"):
        encode_record({"id": "a", "reward": math.nan})


def test_run_lock_is_exclusive(tmp_path: Path) -> None:
    first = RunLock(tmp_path).__enter__()
    with pytest.raises(BatchRunnerError, match="another batch runner"), RunLock(tmp_path):
        pass
    first.__exit__(None, None, None)
    with RunLock(tmp_path):
        pass


def test_iter_records_streams_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_record({"id": "a"}) + encode_record({"id": "b"}) + b'{"id": "c"')
    assert [r["id"] for r in iter_records(path)] == ["a", "b"]
    assert list(iter_records(tmp_path / "missing.jsonl")) == []
