"""A minimal Atropos trainer client: register with ``run-api``, pull ``/batch``, check it.

It does no training; it is the smallest honest consumer of what ``serve`` sends (used by the
end-to-end tests and shown in docs/atropos.md)::

    python -m hermes_atropos_env.trainer --url http://127.0.0.1:8000 --batch-size 2 --batches 1

The command is this package's ``__main__`` module, which nothing imports (so ``python -m``
runs it without runpy's warning about a module imported before it is run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import httpx
from hermes_protocols import BackendTimeout

MASKED = -100
Group = dict[str, Any]


async def register_trainer(
    client: httpx.AsyncClient,
    *,
    batch_size: int,
    max_token_len: int,
    num_steps: int,
    wandb_project: str = "hermes-rl",
    wandb_group: str = "atropos",
) -> int:
    """``POST /register`` as a trainer; returns the trainer's uuid."""
    response = await client.post(
        "/register",
        json={
            "wandb_group": wandb_group,
            "wandb_project": wandb_project,
            "batch_size": batch_size,
            "max_token_len": max_token_len,
            "checkpoint_dir": "",
            "save_checkpoint_interval": -1,
            "starting_step": 0,
            "num_steps": num_steps,
        },
    )
    response.raise_for_status()
    return int(response.json()["uuid"])


async def pull_batch(
    client: httpx.AsyncClient, *, timeout: float, poll_interval: float = 0.5
) -> list[Group]:
    """Poll ``GET /batch`` until a batch arrives; :class:`BackendTimeout` after ``timeout``."""
    try:
        with anyio.fail_after(timeout):
            while True:
                response = await client.get("/batch")
                response.raise_for_status()
                batch = response.json().get("batch")
                if batch:
                    return list(batch)
                await anyio.sleep(poll_interval)
    except TimeoutError as exc:
        raise BackendTimeout(f"no batch from {client.base_url} within {timeout:.0f}s") from exc


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
