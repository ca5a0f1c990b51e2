"""Where records come from: a batch-runner run directory (or a trainer's output, whose
``rollouts/`` is one) or an Atropos ``process`` JSONL.

Both are streamed line by line and read through :mod:`hermes_protocols.formats`, the types
their writers use (a record or group of another format version is refused in one line). An
Atropos group becomes one record per member: its
:class:`~hermes_protocols.formats.TokenSequence` (``tokens``, ``masks`` 0/1, ``logprobs``
``None`` where masked), ``reward`` (its score), ``messages`` when the group carries them,
``prefill_messages`` (its ``group_overrides``: how many messages are a demonstration).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hermes_protocols.formats import (
    AtroposGroup,
    RunDirectory,
    check_trajectory_version,
    training_rollouts,
)

TOKENIZER_FILE = RunDirectory(Path()).tokenizer.name


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
    for path, status in RunDirectory(root).status_logs:
        if path.is_file():
            for number, record in enumerate(_lines(path), 1):
                check_trajectory_version(record, f"{path} record {number}")
                yield {**record, "status": status}


def group_records(
    value: Mapping[str, Any], number: int, where: str | None = None
) -> Iterator[dict[str, Any]]:
    """The members of one ``ScoredDataGroup`` (the ``number``-th of its file, ``where`` in
    errors) as records."""
    group = AtroposGroup.from_json(value, where or f"group {number}")
    item_id = group.item_id or f"group-{number}"
    env = group.environment
    messages = group.messages or []
    for index, sequence in enumerate(group.sequences(f"{env or 'atropos'}/{item_id}")):
        record: dict[str, Any] = {
            "id": sequence.id,
            "env": env,
            "item": {"id": item_id, "data": group.group_overrides.get("item_data")},
            "status": "kept",
            "reward": sequence.reward,
            "messages": messages[index] if index < len(messages) else [],
            "tokens": list(sequence.ids),
            "masks": list(sequence.mask),
            "token_source": sequence.token_source,
            "prefill_messages": group.group_overrides.get("prefill_messages"),
        }
        if group.inference_logprobs is not None:
            record["logprobs"] = list(sequence.logprobs)
        yield record


def atropos_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every rollout of an Atropos ``process`` JSONL (one ``ScoredDataGroup`` per line)."""
    for number, group in enumerate(_lines(path)):
        yield from group_records(group, number, f"{path} group {number + 1}")


def is_group(value: Mapping[str, Any]) -> bool:
    """Whether a JSONL object is an Atropos group (parallel lists) rather than a record."""
    return isinstance(value.get("scores"), list) and isinstance(value.get("tokens"), list)


def run_root(path: Path) -> Path:
    """The run directory ``path`` names: itself, or a trainer output's ``rollouts/`` when
    ``path`` holds no run itself but that does."""
    rollouts = training_rollouts(path)
    if not RunDirectory(path).holds_a_run() and RunDirectory(rollouts).holds_a_run():
        return rollouts
    return path


def records_from(path: Path) -> Iterator[dict[str, Any]]:
    """The records at ``path``: a run directory (``path`` as :func:`run_root` resolves it), an
    Atropos JSONL or a JSONL of records."""
    if path.is_dir():
        path = run_root(path)
        if not RunDirectory(path).holds_a_run():
            raise ReportSourceError(
                f"{path} is not a run directory (no trajectories.jsonl, failed.jsonl or "
                "filtered.jsonl, nor a trainer's rollouts/ with them): pass a batch-runner run "
                "directory, a trainer's --output or a JSONL file"
            )
        return run_dir_records(path)
    if not path.is_file():
        raise ReportSourceError(f"{path} does not exist: pass a run directory or a JSONL file")
    first = next(_lines(path), None)
    if first is not None and is_group(first):
        return atropos_records(path)
    return _lines(path)
