"""What TRL trains on, per completion: its ids and, per id, whether the loss counts it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def trained_completions(batch: Mapping[str, Any]) -> list[dict[str, list[int]]]:
    """Each completion of one of ``GRPOTrainer``'s generation batches (the dict its
    ``_generate_and_score_completions`` returns): its ids up to the end of its
    ``completion_mask`` (padding and what follows the end token dropped), and ``trained``: 1
    where the loss counts the id (the completion mask times the tool mask, which is 0 on the
    tool results TRL spliced in)."""
    rows: list[dict[str, list[int]]] = []
    ids: list[list[int]] = batch["completion_ids"].tolist()
    masks: list[list[int]] = batch["completion_mask"].tolist()
    tool = batch.get("tool_mask")
    tool_masks: list[list[int]] = (
        tool.tolist() if tool is not None else [[1] * len(row) for row in ids]
    )
    for row, mask, tool_mask in zip(ids, masks, tool_masks, strict=True):
        end = max((i + 1 for i, m in enumerate(mask) if m), default=0)
        trained = [int(m * t) for m, t in zip(mask[:end], tool_mask[:end], strict=True)]
        rows.append({"ids": row[:end], "trained": trained})
    return rows
