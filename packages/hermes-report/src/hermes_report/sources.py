"""Where records come from: a batch-runner run directory or an Atropos ``process`` JSONL.

Both are streamed line by line. An Atropos ``ScoredDataGroup`` line becomes one record per
member: ``tokens``, ``masks`` (``-100`` -> 0, else 1), ``logprobs`` (``inference_logprobs``,
``None`` where masked), ``reward`` (its score), ``messages`` when the group carries them,
``prefill_messages`` (its ``group_overrides``: how many messages are a demonstration).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

RUN_LOGS = (
    ("trajectories.jsonl", "kept"),
    ("failed.jsonl", "failed"),
    ("filtered.jsonl", "filtered"),
)
TOKENIZER_FILE = "tokenizer.json"


class ReportSourceError(Exception):
    """The path is neither a run directory nor a JSONL file of records or groups."""


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                # a torn last line of a run that was killed mid-write: the runner repairs it
                # on --resume; the report shows everything before it
                continue
            if not isinstance(value, dict):
                raise ReportSourceError(f"{path}:{number}: expected a JSON object per line")
            yield value


def run_dir_records(root: Path) -> Iterator[dict[str, Any]]:
    """Every record of a batch-runner run directory, kept then failed then filtered."""
    for name, status in RUN_LOGS:
        path = root / name
        if path.is_file():
            for record in _lines(path):
                yield {**record, "status": status}


def _member(group: Mapping[str, Any], key: str, index: int) -> Any:
    values = group.get(key)
    return values[index] if isinstance(values, list) and index < len(values) else None


def group_records(group: Mapping[str, Any], number: int) -> Iterator[dict[str, Any]]:
    """The members of one ``ScoredDataGroup`` as report records."""
    overrides = group.get("group_overrides") or {}
    params = group.get("generation_params") or {}
    source = overrides.get("token_source") or params.get("token_source")
    item_id = str(overrides.get("item_id") or f"group-{number}")
    env = overrides.get("environment")
    for index, ids in enumerate(group.get("tokens") or []):
        masks = _member(group, "masks", index) or []
        mask = [0 if m == -100 else 1 for m in masks]
        logprobs = _member(group, "inference_logprobs", index)
        record: dict[str, Any] = {
            "id": f"{env or 'atropos'}/{item_id}/{index}",
            "env": env,
            "item": {"id": item_id, "data": overrides.get("item_data")},
            "status": "kept",
            "reward": _member(group, "scores", index),
            "messages": _member(group, "messages", index) or [],
            "tokens": ids,
            "masks": mask,
            "token_source": source,
            "prefill_messages": overrides.get("prefill_messages"),
        }
        if isinstance(logprobs, list):
            record["logprobs"] = [lp if m else None for lp, m in zip(logprobs, mask, strict=False)]
        yield record


def atropos_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every rollout of an Atropos ``process`` JSONL (one ``ScoredDataGroup`` per line)."""
    for number, group in enumerate(_lines(path)):
        yield from group_records(group, number)


def is_group(value: Mapping[str, Any]) -> bool:
    """Whether a JSONL object is an Atropos group (parallel lists) rather than a record."""
    return isinstance(value.get("scores"), list) and isinstance(value.get("tokens"), list)


def records_from(path: Path) -> Iterator[dict[str, Any]]:
    """The records at ``path``: a run directory, an Atropos JSONL or a JSONL of records."""
    if path.is_dir():
        if not any((path / name).is_file() for name, _ in RUN_LOGS):
            raise ReportSourceError(
                f"{path} is not a run directory (no trajectories.jsonl, failed.jsonl or "
                "filtered.jsonl): pass a batch-runner run directory or a JSONL file"
            )
        return run_dir_records(path)
    if not path.is_file():
        raise ReportSourceError(f"{path} does not exist: pass a run directory or a JSONL file")
    first = next(_lines(path), None)
    if first is not None and is_group(first):
        return atropos_records(path)
    return _lines(path)
