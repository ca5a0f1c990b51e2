"""Held-out reward by kind of task, for trainer runs side by side: where a trained adapter
gained, and where it did not.

Reads each run's evaluation rollouts (``OUTPUT/rollouts``, phase ``eval``) and groups their
rewards by item data fields (``endless_terminals``: ``family`` and ``difficulty``). Run as
``python -m hermes_trainer.transfer RUN [RUN ...] [--by FIELD,FIELD]``; prints a Markdown
table: one row per kind of task, one column per run and evaluation label, each cell the mean
reward and the rollouts solved (reward 1) out of all scored ones (failed rollouts are left
out, as in ``eval.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hermes_protocols.formats import EVAL_PHASE, RunDirectory, TrainingTag, training_rollouts

Kind = tuple[str, ...]
Column = tuple[str, str]
"""A run and one of its evaluation labels."""


def _records(output: Path) -> Iterator[dict[str, Any]]:
    path = RunDirectory(training_rollouts(output)).trajectories
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def rewards_by_kind(
    outputs: Sequence[Path], by: Sequence[str]
) -> dict[Column, dict[Kind, list[float]]]:
    """``{(run, label): {kind: rewards}}`` of every evaluation in ``outputs``; a kind is the
    values of the item data fields ``by``."""
    table: dict[Column, dict[Kind, list[float]]] = {}
    for output in outputs:
        for record in _records(output):
            tag = TrainingTag.of(record)
            if tag is None or tag.phase != EVAL_PHASE or record.get("reward") is None:
                continue
            data = record["item"].get("data") or {}
            kind = tuple(str(data.get(field, "-")) for field in by)
            column = (str(output), str(tag.label))
            table.setdefault(column, defaultdict(list))[kind].append(float(record["reward"]))
    return table


def markdown(table: dict[Column, dict[Kind, list[float]]], by: Sequence[str]) -> str:
    """The table as Markdown (a cell: ``mean (solved/rollouts)``, ``-`` where none ran)."""
    columns = list(table)
    kinds = sorted({kind for cells in table.values() for kind in cells})
    head = [*by, *(f"{run} {label}" for run, label in columns)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in kinds:
        cells = []
        for column in columns:
            rewards = table[column].get(kind, [])
            solved = sum(reward >= 1.0 for reward in rewards)
            mean = sum(rewards) / len(rewards) if rewards else None
            cells.append("-" if mean is None else f"{mean:.3f} ({solved}/{len(rewards)})")
        rows.append("| " + " | ".join([*kind, *cells]) + " |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hermes_trainer.transfer",
        description="held-out reward by kind of task, for trainer runs side by side",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="trainer --output directories")
    parser.add_argument(
        "--by", default="family,difficulty", help="item data fields (default family,difficulty)"
    )
    args = parser.parse_args(argv)
    by = [field for field in args.by.split(",") if field]
    for run in args.runs:
        if not RunDirectory(training_rollouts(run)).trajectories.is_file():
            parser.error(f"{run} has no rollouts/trajectories.jsonl: not a trainer --output")
    print(markdown(rewards_by_kind(args.runs, by), by))
    return 0


if __name__ == "__main__":
    sys.exit(main())
