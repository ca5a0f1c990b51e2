"""A minimal Atropos trainer: register with ``run-api``, pull ``/batch``, check it (the
client is :mod:`hermes_rollouts.atropos_api`, shared with ``apps/trainer``).

It does no training; it is the smallest honest consumer of what ``serve`` sends (used by the
end-to-end tests and shown in docs/atropos.md)::

    python -m hermes_atropos_env.trainer --url http://127.0.0.1:8000 --batch-size 2 --batches 1

The command is this package's ``__main__`` module, which nothing imports (so ``python -m``
runs it without runpy's warning about a module imported before it is run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
from hermes_protocols.formats import ATROPOS_MASKED as MASKED
from hermes_rollouts.atropos_api import Group, pull_batch, register_trainer


def batch_problems(batch: Sequence[Group]) -> list[str]:
    """Alignment problems of a batch: tokens, masks and inference_logprobs of equal length per
    sequence, each unmasked mask entry equal to its token, a real logprob (<= 0) there.
    Groups marked ``token_source: retokenized`` (phase 1) may carry no logprobs."""
    problems: list[str] = []
    for g, group in enumerate(batch):
        tokens, masks = group.get("tokens") or [], group.get("masks") or []
        logprobs = group.get("inference_logprobs")
        if len(tokens) != len(masks) or len(tokens) != len(group.get("scores") or []):
            problems.append(f"group {g}: {len(tokens)} sequences, {len(masks)} masks")
            continue
        retokenized = (group.get("group_overrides") or {}).get("token_source") == "retokenized"
        if logprobs is None and retokenized:  # phase 1: ids rebuilt from text, no logprobs
            logprobs = [[0.0] * len(ids) for ids in tokens]
        if logprobs is None or len(logprobs) != len(tokens):
            problems.append(f"group {g}: inference_logprobs missing or of the wrong count")
            continue
        for s, (ids, mask, lps) in enumerate(zip(tokens, masks, logprobs, strict=True)):
            if not len(ids) == len(mask) == len(lps):
                problems.append(f"group {g} seq {s}: {len(ids)}/{len(mask)}/{len(lps)} lengths")
                continue
            trainable = [i for i, m in enumerate(mask) if m != MASKED]
            if not trainable:
                problems.append(f"group {g} seq {s}: nothing trainable")
            for i in trainable:
                if mask[i] != ids[i]:
                    problems.append(f"group {g} seq {s} pos {i}: mask {mask[i]} != id {ids[i]}")
                    break
                if not lps[i] <= 0.0:
                    problems.append(f"group {g} seq {s} pos {i}: logprob {lps[i]} > 0")
                    break
    return problems


def summarize(batch: Sequence[Group]) -> dict[str, Any]:
    """Counts for a log line: groups, sequences, tokens, trainable tokens, mean score."""
    sequences = [seq for group in batch for seq in group["tokens"]]
    trainable = sum(m != MASKED for group in batch for mask in group["masks"] for m in mask)
    scores = [s for group in batch for s in group["scores"]]
    return {
        "groups": len(batch),
        "sequences": len(sequences),
        "tokens": sum(len(s) for s in sequences),
        "trainable_tokens": trainable,
        "mean_score": sum(scores) / len(scores) if scores else 0.0,
        "token_source": sorted(
            {str((g.get("group_overrides") or {}).get("token_source")) for g in batch}
        ),
    }


async def run_trainer(
    url: str, *, batch_size: int, max_token_len: int, batches: int, timeout: float
) -> list[list[Group]]:
    """Register, then pull ``batches`` batches (each within ``timeout`` seconds)."""
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        await register_trainer(
            client, batch_size=batch_size, max_token_len=max_token_len, num_steps=batches
        )
        return [await pull_batch(client, timeout=timeout) for _ in range(batches)]
