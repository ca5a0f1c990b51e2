"""apps/batch_runner: generated tokens/s of real batch runs against raw embedded generation.

The model is loaded once. Each repetition:

1. runs the batch runner on 2 fresh endless_terminals items (embedded SmolLM2, bwrap, up to
   2 turns of 48 tokens, concurrency 2); its rate is the generated (trainable) tokens over the
   time spent running rollouts (sandbox setup, tools, verification, durable writes and
   scheduling included, model loading excluded);
2. replays exactly the same generations on the same llama.cpp runtime: each prompt evaluated
   (reusing the cached prefix, as the token backend does) and the recorded ids decoded one by
   one with their logprobs: no loop, no sandbox, no writes, no sampling.

Both start from an empty KV cache.

Ratio = runner rate / raw rate (1.0 = the framework costs nothing); the median over the
repetitions is reported.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from hermes_batch_runner.components import Components
from hermes_batch_runner.config import config_from_options
from hermes_batch_runner.jsonl_log import read_records
from hermes_batch_runner.wiring import SessionComponents, real_components
from hermes_loop.embedded import EmbeddedTokenBackend, LlamaRuntime, token_logprob
from hermes_protocols import Item, ScoredRollout
from hermes_rollouts import Credentials

from benchmarks.batch_runs import fixed, run_once
from benchmarks.report import write_section

REPS, ITEMS_PER_REP = 3, 2
OPTIONS = {"max_turns": 2, "max_tokens": 48, "concurrency": 2, "seed": 0}
COMMAND = "uv run --frozen --no-sync python -m benchmarks batch_runner"


class ItemSubset:
    """The same components restricted to some items (one repetition's share)."""

    def __init__(self, inner: SessionComponents, items: Sequence[Item]) -> None:
        self._inner = inner
        self.items = tuple(items)
        self.env_name = inner.env_name
        self.model = inner.model

    async def run_one(self, item: Item, item_index: int, group_index: int) -> ScoredRollout:
        return await self._inner.run_one(item, item_index, group_index)


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


def _outside_generation(record: dict[str, Any]) -> float:
    """Seconds a rollout spent in the sandbox and verifier (acquire, setup, tools, verify,
    release): the framework's share that is not inference."""
    timings = record["timings"]
    phases = sum(float(timings.get(k) or 0.0) for k in ("acquire_s", "setup_s", "verify_s"))
    tools = sum(float(t.get("tools_s") or 0.0) for t in timings.get("turns", []))
    return phases + float(timings.get("release_s") or 0.0) + tools


def replay(runtime: LlamaRuntime, work: Sequence[tuple[list[int], list[int]]]) -> float:
    """Evaluate each prompt (reusing the cached prefix) and decode its recorded ids one by one
    with their logprobs, as the token backend does minus sampling; returns seconds."""
    runtime.truncate(0)  # start cold, as the runner did
    began = time.perf_counter()
    for prompt, generated in work:
        keep = min(runtime.common_prefix(prompt), len(prompt) - 1)
        runtime.truncate(keep)
        logits = runtime.feed(prompt[keep:])
        for index, token in enumerate(generated):
            token_logprob(logits, token)
            if index < len(generated) - 1:
                logits = runtime.feed_one(token)
    return time.perf_counter() - began


async def _one_batch(root: Path, components: Components) -> tuple[float, list[dict[str, Any]]]:
    session = await run_once(root, OPTIONS, fixed(components))
    return float(session["active_s"]), read_records(root / "trajectories.jsonl")


async def _bench() -> str:
    config = config_from_options({**OPTIONS, "num_items": REPS * ITEMS_PER_REP})
    rows: list[tuple[int, float, float]] = []
    outside: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with real_components(config, credentials=Credentials()) as full:
            backend = full.session.model.model.backend
            assert isinstance(backend, EmbeddedTokenBackend)
            for rep in range(REPS):
                items = full.items[rep * ITEMS_PER_REP : (rep + 1) * ITEMS_PER_REP]
                await anyio.to_thread.run_sync(backend.runtime.truncate, 0)  # cold KV cache
                active, records = await _one_batch(Path(tmp) / f"rep{rep}", ItemSubset(full, items))
                work = [g for r in records for g in generations(r)]
                raw = await anyio.to_thread.run_sync(replay, backend.runtime, work)
                rows.append((sum(len(ids) for _, ids in work), active, raw))
                outside.append(sum(_outside_generation(r) for r in records))
    table = "\n".join(
        f"| {i + 1} | {n} | {a:.1f} | {n / a:.2f} | {r:.1f} | {n / r:.2f} | {r / a:.2f} |"
        for i, (n, a, r) in enumerate(rows)
    )
    ratio = statistics.median(r / a for _, a, r in rows)
    runner = statistics.median(n / a for n, a, _ in rows)
    raw = statistics.median(n / r for n, _, r in rows)
    return (
        f"{REPS} repetitions of {ITEMS_PER_REP} endless_terminals items with the embedded "
        f"SmolLM2-135M on bwrap (options: {OPTIONS}); the model is loaded once.\n\n"
        "| rep | generated tokens | runner s | runner tokens/s | raw s | raw tokens/s | ratio |\n"
        "|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{table}\n\n"
        f"**Median: runner {runner:.2f} tokens/s, raw {raw:.2f} tokens/s, ratio (runner / raw) "
        f"{ratio:.2f}.** Sandbox and verifier time (acquire, setup, tools, verify, release) "
        f"summed over each repetition's rollouts: median {statistics.median(outside):.2f} s. "
        "Runner time covers sandbox setup, tools, verification, durable writes "
        "and scheduling; the two rollouts of a repetition share the one in-process model (their "
        "generations queue), the replay runs the same generations back to back, both from an "
        "empty KV cache. The machine "
        "is shared (2 cores, other workloads), so absolute rates are noisy; the ratio is the "
        "number to watch.\n"
    )


def main() -> None:
    body = anyio.run(_bench)
    write_section(
        "batch_runner", "Batch runner: tokens/s vs raw embedded generation", COMMAND, body
    )
