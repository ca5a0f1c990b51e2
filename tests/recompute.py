"""Teacher-forced logprobs by the embedded model in a fresh process, as a trainer would
recompute a record's: ``python -m tests.recompute`` reads ``[[ids, start], ...]`` (JSON) on
stdin and prints, as one JSON line, the logprobs of each ``ids[start:]`` (llama.cpp computes no
logits before ``start``, so starting at the first sampled id skips the prompt's)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent


async def recompute(
    sequences: Sequence[tuple[Sequence[int], int]], *, timeout_s: float = 600
) -> list[list[float]]:
    """The logprobs of each ``ids[start:]`` of ``sequences``, from a fresh process."""
    with anyio.fail_after(timeout_s):
        done = await anyio.run_process(
            [sys.executable, "-m", "tests.recompute"],
            input=json.dumps([[list(ids), start] for ids, start in sequences]).encode(),
            cwd=ROOT,
            check=True,
        )
    rows: list[list[float]] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return rows


async def _main() -> None:
    from hermes_loop.embedded.token_backend import EmbeddedTokenBackend

    sequences = json.load(sys.stdin)
    async with await EmbeddedTokenBackend.open(n_ctx=2048) as model:
        print(json.dumps([await model.score(ids, start=start) for ids, start in sequences]))


if __name__ == "__main__":
    anyio.run(_main)
