"""The trainer's update with and without recomputing each layer in the backward pass.

One fresh process per variant (peak RSS is per process): a ``LoraLearner`` on the shipped
SmolLM2 (rank 8) updates 3 times on 4 groups of 8 synthetic sequences sharing a 1,000-token
prefix, 40 trainable tokens each (one packed row of 1,320 tokens per group, padded to 1,536:
the shape of the measured recipe's steps). Update time: the median of updates 2 and 3 (the
first compiles); the loss of each update must be the same in both.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks.report import write_section

COMMAND = "uv run --frozen --no-sync python -m benchmarks trainer_memory"
PREFIX, TAIL, GROUPS, SIZE, UPDATES = 1000, 40, 4, 8, 3
VARIANTS = {"every activation kept": False, "layers recomputed (default)": True}


def _updates(remat: bool) -> dict[str, object]:
    """In the child process: the update times, losses and peak RSS of one variant."""
    from hermes_loop.embedded import default_model_path
    from hermes_trainer.gguf_weights import read_base_weights
    from hermes_trainer.grpo import TrainGroup
    from hermes_trainer.learner import LoraLearner
    from hermes_trainer.lora import LoraSpec
    from hermes_trainer.optimizer import OptimizerSpec
    from hermes_trainer.packing import TrainSequence

    base = read_base_weights(default_model_path())
    learner = LoraLearner(base, LoraSpec(), OptimizerSpec(), remat=remat)
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(GROUPS):
        prefix = tuple(int(i) for i in rng.integers(0, 49152, PREFIX))
        sequences = [
            TrainSequence(
                ids=prefix + tuple(int(i) for i in rng.integers(0, 49152, TAIL)),
                mask=(0,) * PREFIX + (1,) * TAIL,
                sampler_logprobs=(0.0,) * PREFIX + tuple(-rng.uniform(0.1, 3.0, TAIL)),
                advantage=1.0 if k % 2 else -1.0,
            )
            for k in range(SIZE)
        ]
        groups.append(TrainGroup(sequences=tuple(sequences), temperature=0.6))
    seconds, losses = [], []
    for _ in range(UPDATES):
        started = time.perf_counter()
        losses.append(learner.update(groups).loss)
        seconds.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"seconds": seconds, "losses": losses, "peak_gib": peak}


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_trainer_memory``."""
    load = os.getloadavg()[0]
    results = {}
    for name, remat in VARIANTS.items():
        code = (
            "import json, benchmarks.bench_trainer_memory as b; "
            f"print(json.dumps(b._updates({remat})))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=3600
        )
        results[name] = json.loads(done.stdout.splitlines()[-1])
    losses = {tuple(round(x, 6) for x in r["losses"]) for r in results.values()}
    if len(losses) != 1:
        raise SystemExit(f"the variants' losses differ: {losses}")
    base = results["every activation kept"]
    base_s = statistics.median(base["seconds"][1:])
    rows = []
    for name, r in results.items():
        median_s = statistics.median(r["seconds"][1:])
        rows.append(
            f"| {name} | {r['peak_gib']:.2f} ({r['peak_gib'] / base['peak_gib']:.2f}x) | "
            f"{r['seconds'][0]:.1f} | {median_s:.1f} ({median_s / base_s:.2f}x) |"
        )
    table = "\n".join(rows)
    body = f"""
A `LoraLearner` (rank 8) on the shipped SmolLM2 updates {UPDATES} times on {GROUPS} groups of
{SIZE} synthetic sequences sharing a {PREFIX}-token prefix, {TAIL} trainable tokens each (a
packed row of {PREFIX + SIZE * TAIL} tokens per group, padded to 1,536), in a fresh process per
variant. The losses of the two variants are equal (checked). Load average (1 min) at the start:
{load:.2f}.

| backward pass | peak RSS GiB (ratio) | first update s | later updates s, median (ratio) |
|---|---:|---:|---:|
{table}
"""
    write_section(
        "trainer_memory",
        "hermes-trainer: the update's memory, each layer recomputed in the backward pass or not",
        COMMAND,
        body,
    )
    print(body)
