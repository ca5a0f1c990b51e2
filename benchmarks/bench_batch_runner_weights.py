"""apps/batch_runner: the issue-27 command on the shipped Q4_1 SmolLM2 vs the default (its
Q8_0 conversion), interleaved in the same run.

Each round runs the same 8 endless_terminals items twice through the real batch runner
(embedded SmolLM2-135M, bwrap, 8 rollouts in flight on 8 KV sequences, 2 turns of up to 128
tokens, temperature 1), once with ``--model`` the shipped Q4_1 file and once with the default
model, each session loading the model afresh. Rate = generated tokens / rollout (active) time.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
from hermes_loop.embedded import default_model_path, shipped_model_path

from benchmarks.batch_runs import tokens_and_time
from benchmarks.report import write_section

#: interleaved rounds unless the command line gives another count
DEFAULT_ROUNDS = 3
OPTIONS = {
    "num_items": 8,
    "concurrency": 8,
    "max_tokens": 128,
    "max_turns": 2,
    "temperature": 1.0,
    "sandbox_slots": 8,
    "seed": 0,
}
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner_weights"
ISSUE_COMMAND = (
    "uv run apps/batch_runner --num-items 8 --concurrency 8 --sandbox-slots 8 --max-tokens 128 "
    "--max-turns 2 --temperature 1.0"
)


async def _run(root: Path, model: Path | None) -> tuple[int, float]:
    """(generated tokens, active seconds) of one batch on ``model`` (``None``: the default)."""
    return await tokens_and_time(root, {**OPTIONS, **({"model": str(model)} if model else {})})


async def _bench(rounds: int) -> str:
    load = os.getloadavg()[0]
    default = await anyio.to_thread.run_sync(default_model_path)  # converted before timing
    rows: list[tuple[int, float, int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            q4 = await _run(Path(tmp) / f"q4_1-{index}", shipped_model_path())
            q8 = await _run(Path(tmp) / f"default-{index}", None)
            rows.append((*q4, *q8))
    table = "\n".join(
        f"| {i + 1} | {n4} | {a4:.1f} | {n4 / a4:.1f} | {n8} | {a8:.1f} | {n8 / a8:.1f} | "
        f"{(n8 / a8) / (n4 / a4):.2f} |"
        for i, (n4, a4, n8, a8) in enumerate(rows)
    )
    before = statistics.median(n / a for n, a, _, _ in rows)
    after = statistics.median(n / a for _, _, n, a in rows)
    ratio = statistics.median((n8 / a8) / (n4 / a4) for n4, a4, n8, a8 in rows)
    return (
        f"The issue's command, `{ISSUE_COMMAND}`, run through the batch runner's own code "
        f"{rounds} times with `--model` the shipped Q4_1 GGUF and with the default model "
        f"({default.name}, converted from it), interleaved; each run loads the model. "
        f"Generated tokens over rollout (active) time. Load average (1 min) at the start: "
        f"{load:.2f}.\n\n"
        "| round | Q4_1: tokens | s | tok/s | default: tokens | s | tok/s | ratio |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{table}\n\n"
        f"**Median: {after:.1f} tok/s on the default model, {before:.1f} on Q4_1; ratio "
        f"{ratio:.2f}.** The two files sample different tokens (different weights), so the "
        "token counts differ and the rates are of two workloads; `batch_runner_replay` runs "
        "the same work on both. Goal (issue 27): 2x.\n"
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_batch_runner_weights [ROUNDS]``."""
    body = anyio.run(_bench, int(argv[0]) if argv else DEFAULT_ROUNDS)
    write_section(
        "batch_runner_weights",
        "apps/batch_runner: the shipped Q4_1 model vs the default Q8_0 conversion",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
