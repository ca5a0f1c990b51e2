"""Retrying rollouts that failed for infrastructure reasons (a dead sandbox, a backend down).

Their records move from ``failed.jsonl`` to ``failed_history.jsonl`` (appended and synced
first, then ``failed.jsonl`` is rewritten atomically without them), so every finished id stays
in exactly one of the three logs while the earlier failures are kept as history.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hermes_protocols.formats import RunDirectory
from hermes_rollouts import encode_record

from hermes_batch_runner.jsonl_log import iter_records

HISTORY_FILE = "failed_history.jsonl"


def history_path(paths: RunDirectory) -> Path:
    return paths.root / HISTORY_FILE


def is_infrastructure_failure(record: dict[str, Any]) -> bool:
    failure = record.get("failure")
    return isinstance(failure, dict) and failure.get("kind") == "infrastructure"


def _append_synced(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path, "ab") as handle:
        for record in records:
            handle.write(encode_record(record))
        handle.flush()
        os.fsync(handle.fileno())


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        for record in records:
            handle.write(encode_record(record))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def release_infrastructure_failures(paths: RunDirectory) -> frozenset[str]:
    """Move the infrastructure failures out of ``failed.jsonl`` into the history file; returns
    their ids (to run again). Call with the run lock held, after the logs are recovered."""
    records = list(iter_records(paths.failed))
    retry = [r for r in records if is_infrastructure_failure(r)]
    if not retry:
        return frozenset()
    _append_synced(history_path(paths), retry)
    _rewrite(paths.failed, [r for r in records if not is_infrastructure_failure(r)])
    return frozenset(str(r["id"]) for r in retry)


def count_infrastructure_failures(paths: RunDirectory) -> int:
    return sum(1 for r in iter_records(paths.failed) if is_infrastructure_failure(r))
