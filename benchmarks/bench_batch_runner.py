"""apps/batch_runner: generated tokens/s of a real batch run against raw embedded generation.

1. The batch runner runs endless_terminals with the embedded SmolLM2 model on bwrap (2 items,
   up to 2 turns of 48 tokens, concurrency 2): the rate is the generated (trainable) tokens of
   every rollout over the wall time from "model loaded" to "last rollout written" (sandbox
   setup, tools, verification, durable writes and scheduling included).
2. Baseline, same process: the same model (llama.cpp runtime, same context settings) replays
   exactly the same generations: each prompt is evaluated (reusing the cached prefix, as the
   backend does) and the recorded ids are decoded one by one with their logprobs (no loop, no
   sandbox, no writes, no sampling). Ratio = runner rate / raw rate (1.0 = the framework costs
   nothing).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from hermes_batch_runner.app import run_batch
from hermes_batch_runner.components import Components
from hermes_batch_runner.config import RunConfig, config_from_options
from hermes_batch_runner.credentials import Credentials
from hermes_batch_runner.jsonl_log import read_records
from hermes_batch_runner.run_dir import prepare_run_dir
from hermes_batch_runner.wiring import real_components
from hermes_loop.embedded import EmbeddedModel, LlamaRuntime, token_logprob
from rich.console import Console

from benchmarks.report import write_section

OPTIONS = {"num_items": 2, "max_turns": 2, "max_tokens": 48, "concurrency": 2, "seed": 0}
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner"


def generations(record: dict[str, Any]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, generated ids) of every turn, read off the token trace's mask."""
    tokens, masks = record["tokens"], record["masks"]
    out: list[tuple[list[int], list[int]]] = []
    start = None
    for index, mask in enumerate([*masks, 0]):
        if mask == 1 and start is None:
            start = index
        elif mask != 1 and start is not None:
            out.append((tokens[:start], tokens[start:index]))
            start = None
    return out


async def _batch_run(root: Path) -> tuple[float, list[dict[str, Any]]]:
    config = config_from_options({**OPTIONS, "output": str(root), "progress": False})
    paths = prepare_run_dir(root, resume=False)
    marks: dict[str, float] = {}

    @asynccontextmanager
    async def timed(cfg: RunConfig) -> AsyncIterator[Components]:
        async with real_components(cfg, credentials=Credentials()) as components:
            marks["ready"] = time.perf_counter()
            yield components
            marks["done"] = time.perf_counter()

    await run_batch(
        config,
        paths,
        resume=False,
        wiring=timed,
        console=Console(stderr=True, quiet=True),
        argv=[],
        handle_signals=False,
    )
    return marks["done"] - marks["ready"], read_records(paths.trajectories)


def _replay(runtime: LlamaRuntime, work: Sequence[tuple[list[int], list[int]]]) -> list[float]:
    """Prefill each prompt (reusing the cached prefix) and decode its recorded ids one by one
    with their logprobs, as the token backend does, minus sampling; tokens/s per generation."""
    rates: list[float] = []
    for prompt, generated in work:
        began = time.perf_counter()
        keep = min(runtime.common_prefix(prompt), len(prompt) - 1)
        runtime.truncate(keep)
        logits = runtime.feed(prompt[keep:])
        for index, token in enumerate(generated):
            token_logprob(logits, token)
            if index < len(generated) - 1:
                logits = runtime.feed_one(token)
        rates.append(len(generated) / (time.perf_counter() - began))
    return rates


async def _raw(work: Sequence[tuple[list[int], list[int]]]) -> tuple[float, list[float]]:
    async with await EmbeddedModel.open(n_ctx=RunConfig().context_tokens) as model:
        runtime = model.backend.runtime
        start = time.perf_counter()
        rates = await anyio.to_thread.run_sync(_replay, runtime, work)
        return time.perf_counter() - start, rates


async def _bench() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        wall, records = await _batch_run(Path(tmp) / "run")
    work = [g for r in records for g in generations(r)]
    runner_tokens = sum(len(ids) for _, ids in work)
    per_turn = [
        t["completion_tokens"] / t["generation_s"]
        for r in records
        for t in r["timings"].get("turns", [])
        if t["generation_s"] > 0
    ]
    raw_wall, raw_per_call = await _raw(work)
    raw_tokens = runner_tokens
    runner_rate = runner_tokens / wall
    raw_rate = raw_tokens / raw_wall
    return (
        f"{len(records)} rollouts, {len(work)} generations, {runner_tokens} generated tokens "
        f"(options: {OPTIONS}).\n\n"
        "| | tokens | wall (s) | tokens/s | median per generation (tokens/s) |\n"
        "|---|---:|---:|---:|---:|\n"
        f"| batch runner (loop + bwrap + verify + fsync) | {runner_tokens} | {wall:.1f} | "
        f"{runner_rate:.2f} | {statistics.median(per_turn) if per_turn else 0:.2f} |\n"
        f"| raw llama.cpp replay of the same ids | {raw_tokens} | {raw_wall:.1f} | "
        f"{raw_rate:.2f} | {statistics.median(raw_per_call) if raw_per_call else 0:.2f} |\n\n"
        f"**Ratio (runner / raw): {runner_rate / raw_rate:.2f}**. The runner interleaves two "
        "rollouts on one in-process model, so each turn re-evaluates the part of its prompt "
        "that differs from the other rollout's (the KV cache keeps one sequence); the replay "
        "runs each rollout's turns back to back. The runner's per-generation rate includes "
        "waiting for the model while the other rollout generates. The machine is shared "
        "(2 cores, other workloads), so absolute rates are noisy; the ratio is the number "
        "to watch.\n"
    )


def main() -> None:
    body = anyio.run(_bench)
    write_section(
        "batch_runner", "Batch runner: tokens/s vs raw embedded generation", COMMAND, body
    )
