"""apps/batch_runner's model work, replayed: the same rollouts' turns on the shipped Q4_1
SmolLM2 and on the default (its Q8_0 conversion), so both files evaluate exactly the same ids.

The two files sample different tokens, so the issue-27 command generates different amounts of
text on each and its tokens/s (``bench_batch_runner_weights``) compares two workloads. Here one
run of the command on the Q4_1 file records its rollouts; each rollout's turns (the ids before
each generated span, and the span) are then replayed on one backend per file, interleaved:
8 rollouts at once on 8 KV sequences as in the run, each turn submitted when the one before it
returned, its generated ids forced one by one (each still evaluated and its logprob computed).
Model time only, no sandbox or verifier: rate = forced ids / wall time of the replay.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from hermes_batch_runner.jsonl_log import read_records
from hermes_loop.embedded import EmbeddedTokenBackend, default_model_path, shipped_model_path
from hermes_loop.embedded.requests import GenerateRequest
from hermes_loop.embedded.runtime import FloatArray
from hermes_loop.embedded.sampling import TokenSampler, token_logprob
from hermes_protocols import SamplingParams
from hermes_protocols.formats.run_directory import RunDirectory
from hermes_protocols.formats.trajectory_record import trajectory_sequence

from benchmarks.batch_runs import tokens_and_time
from benchmarks.bench_batch_runner_weights import ISSUE_COMMAND, OPTIONS
from benchmarks.report import write_section

#: interleaved rounds unless the command line gives another count
DEFAULT_ROUNDS = 3
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner_replay"
#: one turn: the ids before a generated span, and the span
Turn = tuple[list[int], list[int]]


class ForcedSampler(TokenSampler):
    """Returns the given ids in order, each with its raw logprob under the logits."""

    def __init__(self, ids: Sequence[int]) -> None:
        super().__init__(SamplingParams(temperature=1.0, max_tokens=len(ids)))
        self._ids = iter(ids)

    def sample(self, logits: FloatArray) -> tuple[int, float]:
        token = next(self._ids)
        return token, token_logprob(logits, token)


def turns(ids: Sequence[int], mask: Sequence[int]) -> list[Turn]:
    """Each maximal run of trainable ids (a generation) with every id before it."""
    found: list[Turn] = []
    start = None
    for index, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = index
        elif not bit and start is not None:
            found.append((list(ids[:start]), list(ids[start:index])))
            start = None
    return found


async def _replay(model: Path, rollouts: list[list[Turn]]) -> tuple[float, int]:
    """(seconds, decode steps) to replay ``rollouts`` at once on a fresh backend."""
    async with await EmbeddedTokenBackend.open(model, concurrency=len(rollouts)) as backend:

        async def rollout(own: list[Turn]) -> None:
            for prompt, generated in own:
                request = GenerateRequest(prompt, SamplingParams(max_tokens=len(generated)))
                request.sampler = ForcedSampler(generated)
                backend.scheduler.submit(request)
                try:
                    await anyio.to_thread.run_sync(request.wait, 600.0, abandon_on_cancel=True)
                finally:
                    request.cancel.set()  # no effect once finished; else frees its sequence
                if list(request.outcome().ids) != generated:
                    raise RuntimeError("the replay did not reproduce a generated span")

        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for own in rollouts:
                group.start_soon(rollout, own)
        return time.perf_counter() - began, backend.scheduler.steps


async def _bench(rounds: int) -> str:
    load = os.getloadavg()[0]
    default = await anyio.to_thread.run_sync(default_model_path)  # converted before timing
    shipped = shipped_model_path()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "q4_1"
        await tokens_and_time(root, {**OPTIONS, "model": str(shipped)})
        records = await anyio.to_thread.run_sync(read_records, RunDirectory(root).trajectories)
    sequences = [trajectory_sequence(r, "the benchmark run") for r in records]
    rollouts = [turns(s.ids, s.mask) for s in sequences if s is not None]
    forced = sum(len(g) for own in rollouts for _, g in own)
    rows: list[tuple[float, int, float, int]] = []
    for _ in range(rounds):
        rows.append((*await _replay(shipped, rollouts), *await _replay(default, rollouts)))
    table = "\n".join(
        f"| {i + 1} | {s4:.2f} | {n4} | {forced / s4:.1f} | {s8:.2f} | {n8} | {forced / s8:.1f} "
        f"| {s4 / s8:.2f} |"
        for i, (s4, n4, s8, n8) in enumerate(rows)
    )
    ratio = statistics.median(s4 / s8 for s4, _, s8, _ in rows)
    n_turns = sum(len(own) for own in rollouts)
    return (
        f"The rollouts of one run of the issue's command, `{ISSUE_COMMAND}`, on the shipped Q4_1 "
        f"GGUF ({len(rollouts)} rollouts, {n_turns} turns, {forced} generated ids), replayed "
        f"on each file: {len(rollouts)} rollouts at once on as many KV sequences, each turn "
        "after the one before it, its generated ids forced (each evaluated, its logprob "
        "computed). Both files evaluate exactly the same ids; the threads are tuned as by "
        f"default. Model time only; ids/s is generated ids per second. {rounds} interleaved "
        "rounds, each on a freshly loaded model. "
        f"Load average (1 min) at the start: {load:.2f}.\n\n"
        f"| round | Q4_1: s | steps | ids/s | {default.name}: s | steps | ids/s | speed-up |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{table}\n\n"
        f"**Median speed-up of the default over Q4_1 on the same work: {ratio:.2f}x.** "
        "Goal (issue 27): 2x.\n"
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_batch_runner_replay [ROUNDS]``."""
    body = anyio.run(_bench, int(argv[0]) if argv else DEFAULT_ROUNDS)
    write_section(
        "batch_runner_replay",
        "apps/batch_runner: the same rollouts replayed on Q4_1 and on the default Q8_0",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
