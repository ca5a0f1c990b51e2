"""SWE-smith rows: parse, validate and load them (local JSONL or the HF dataset)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hermes_envs.errors import DatasetError

HF_DATASET = "NousResearch/SWE-smith-oracle"


def _node_ids(value: Any, field: str, row_id: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{row_id}: {field} is neither a list nor JSON: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(f"{row_id}: {field} must be a list of pytest node ids")
    return tuple(value)


@attrs.frozen(slots=True)
class SweRow:
    """One SWE-smith task. ``ref`` is ``base_commit`` or, failing that, ``instance_id`` (a
    branch of the mirror repository)."""

    instance_id: str
    repo: str
    ref: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    text: str | None = None
    patch: str | None = None

    @classmethod
    def parse(cls, row: Mapping[str, Any]) -> SweRow:
        row_id = str(row.get("instance_id") or row.get("base_commit") or "<row>")
        for key in ("repo", "problem_statement"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise DatasetError(f"{row_id}: missing or empty {key!r}")
        ref = row.get("base_commit") or row.get("instance_id")
        if not isinstance(ref, str) or not ref:
            raise DatasetError(f"{row_id}: needs base_commit or instance_id")
        f2p = _node_ids(row.get("FAIL_TO_PASS", []), "FAIL_TO_PASS", row_id)
        if not f2p:
            raise DatasetError(f"{row_id}: FAIL_TO_PASS is empty, nothing to verify")
        text = row.get("text")
        patch = row.get("patch")
        return cls(
            instance_id=str(row.get("instance_id") or ref),
            repo=row["repo"],
            ref=ref,
            problem_statement=row["problem_statement"],
            fail_to_pass=f2p,
            pass_to_pass=_node_ids(row.get("PASS_TO_PASS", []), "PASS_TO_PASS", row_id),
            text=text if isinstance(text, str) and text else None,
            patch=patch if isinstance(patch, str) and patch else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.ref,
            "problem_statement": self.problem_statement,
            "FAIL_TO_PASS": list(self.fail_to_pass),
            "PASS_TO_PASS": list(self.pass_to_pass),
            "text": self.text,
            "patch": self.patch,
        }


def load_jsonl(path: Path) -> list[SweRow]:
    """Rows from a JSONL file (one SWE-smith row per line, blank lines ignored)."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(SweRow.parse(json.loads(line)))
            except (json.JSONDecodeError, DatasetError) as exc:
                raise DatasetError(f"{path}:{number}: {exc}") from exc
    return rows


def load_hf(
    name: str = HF_DATASET, split: str = "train", cache_dir: str | None = None
) -> list[SweRow]:
    """Rows from the Hugging Face dataset (blocking: call it from a worker thread)."""
    try:
        import datasets  # type: ignore[import-untyped]
    except ImportError as exc:
        raise DatasetError("install hermes-envs[hf] to load SWE-smith from the Hub") from exc
    table = datasets.load_dataset(name, split=split, cache_dir=cache_dir)
    return [SweRow.parse(row) for row in table]
