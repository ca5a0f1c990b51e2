"""apps/batch_runner's model work, replayed: the same rollouts' turns on the shipped Q4_1
SmolLM2 and on the default (its Q8_0 conversion), on stock llama.cpp and on the workspace's
patched build, so every configuration evaluates exactly the same ids.

The two files sample different tokens, so the issue-27 command generates different amounts of
text on each and its tokens/s (``bench_batch_runner_weights``) compares two workloads. Here one
run of the command on the Q4_1 file records its rollouts; each rollout's turns (the ids before
each generated span, and the span) are then replayed, one process per configuration,
interleaved: stock llama-cpp-python (``benchmarks.stock_llama``) on Q4_1 (the path before issue
27) and on Q8_0 (what the conversion bought), then the workspace's build on Q8_0 (what the
attention patch bought). 8 rollouts at once on 8 KV sequences as in the run, each turn
submitted when the one before it returned, its generated ids forced one by one (each still
evaluated and its logprob computed). Model time only, no sandbox or verifier: rate = forced ids
/ wall time of the replay.
"""

from __future__ import annotations

import json
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
from benchmarks.stock_llama import print_answer, run_child

#: interleaved rounds unless the command line gives another count
DEFAULT_ROUNDS = 3
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner_replay"
#: one turn: the ids before a generated span, and the span
Turn = tuple[list[int], list[int]]
#: a replay's child process may take this long
REPLAY_TIMEOUT_S = 900


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


def _replay_in_child(model: Path, rollouts_file: Path, stock: bool) -> tuple[float, int]:
    """``_replay`` in a fresh process, on stock llama-cpp-python or the workspace's build."""
    args = ("--replay", str(model), str(rollouts_file))
    seconds, steps = run_child(__spec__.name, args, stock=stock, timeout_s=REPLAY_TIMEOUT_S)
    return seconds, steps


async def _bench(rounds: int) -> str:
    load = os.getloadavg()[0]
    default = await anyio.to_thread.run_sync(default_model_path)  # converted before timing
    shipped = shipped_model_path()
    configurations = [(shipped, True), (default, True), (default, False)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "q4_1"
        await tokens_and_time(root, {**OPTIONS, "model": str(shipped)})
        records = await anyio.to_thread.run_sync(read_records, RunDirectory(root).trajectories)
        sequences = [trajectory_sequence(r, "the benchmark run") for r in records]
        rollouts = [turns(s.ids, s.mask) for s in sequences if s is not None]
        rollouts_file = Path(tmp) / "rollouts.json"
        rollouts_file.write_text(json.dumps(rollouts))
        rows: list[list[tuple[float, int]]] = []
        for _ in range(rounds):
            rows.append(
                [
                    await anyio.to_thread.run_sync(_replay_in_child, model, rollouts_file, stock)
                    for model, stock in configurations
                ]
            )
    forced = sum(len(g) for own in rollouts for _, g in own)
    table = "\n".join(
        f"| {i + 1} | "
        + " | ".join(f"{s:.2f} | {n} | {forced / s:.1f}" for s, n in row)
        + f" | {row[0][0] / row[1][0]:.2f} | {row[1][0] / row[2][0]:.2f} "
        f"| **{row[0][0] / row[2][0]:.2f}** |"
        for i, row in enumerate(rows)
    )

    def median_ratio(a: int, b: int) -> float:
        return statistics.median(row[a][0] / row[b][0] for row in rows)

    rates = [statistics.median(forced / row[c][0] for row in rows) for c in range(3)]
    n_turns = sum(len(own) for own in rollouts)
    return (
        f"The rollouts of one run of the issue's command, `{ISSUE_COMMAND}`, on the shipped Q4_1 "
        f"GGUF ({len(rollouts)} rollouts, {n_turns} turns, {forced} generated ids), replayed "
        f"in three configurations: stock llama-cpp-python on Q4_1 (the path before issue 27), "
        f"stock on {default.name} (the conversion), and the workspace's patched build on "
        f"{default.name} (the conversion and the attention loop). {len(rollouts)} rollouts at "
        "once on as many KV sequences, each turn after the one before it, its generated ids "
        "forced (each evaluated, its logprob computed); every configuration evaluates exactly "
        "the same ids, with the threads tuned as by default. Model time only; ids/s is "
        f"generated ids per second. {rounds} interleaved rounds, one process per replay. "
        f"Load average (1 min) at the start: {load:.2f}.\n\n"
        "| round | stock Q4_1: s | steps | ids/s | stock Q8_0: s | steps | ids/s "
        "| patched Q8_0: s | steps | ids/s | conversion | attention loop | both |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{table}\n\n"
        f"Medians: {rates[0]:.1f}, {rates[1]:.1f} and {rates[2]:.1f} ids/s. The conversion "
        f"bought {median_ratio(0, 1):.2f}x and the attention loop {median_ratio(1, 2):.2f}x; "
        f"**the default (patched Q8_0) against the Q4_1 path before issue 27: "
        f"{median_ratio(0, 2):.2f}x** (median of the per-round ratios). Goal (issue 27): 2x.\n"
    )


def _child(model: str, rollouts_file: str) -> None:
    """``--replay MODEL ROLLOUTS.json``: one replay; its seconds and steps on stdout."""
    rollouts = [
        [(list(p), list(g)) for p, g in own] for own in json.loads(Path(rollouts_file).read_text())
    ]
    print_answer(anyio.run(_replay, Path(model), rollouts))


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_batch_runner_replay [ROUNDS]``."""
    if argv and argv[0] == "--replay":
        _child(*argv[1:])
        return
    body = anyio.run(_bench, int(argv[0]) if argv else DEFAULT_ROUNDS)
    write_section(
        "batch_runner_replay",
        "apps/batch_runner: the same rollouts replayed on stock Q4_1, stock Q8_0 and patched Q8_0",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
