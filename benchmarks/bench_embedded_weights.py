"""The embedded runtime on the shipped Q4_1 SmolLM2 against its Q8_0 and F16 conversions.

Same runtime settings as the backend (``LlamaRuntime``: one KV stream per sequence, q8_0 K/V
cache, flash attention, 32-id micro-batches), same ids, same thread count, one process. Three
measurements per file, in interleaved rounds (Q4_1, Q8_0, F16, then again):

* decode N = 1: one sequence, one id per ``llama_decode`` (greedy ids fed back);
* decode N = 8: 8 sequences, one id of each per ``llama_decode``;
* prompt: a 512-id prompt evaluated from an empty sequence (its last row of logits only).

Medians over the rounds and the median of the per-round ratios to Q4_1.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import gguf
import numpy as np
from hermes_loop.embedded import LlamaRuntime, converted_model, shipped_model_path
from hermes_loop.embedded.model_convert import default_model_cache_dir

from benchmarks.report import write_section

#: interleaved rounds unless the command line gives another count
DEFAULT_ROUNDS = 5
STEPS = 64
PROMPT_IDS = 512
SEQS = 8
#: llama.cpp threads (1: the number that does not depend on what else runs on the machine)
THREADS = 1
LOGPROB_PROMPT = (
    "<|im_start|>user\nWrite a short story about a dragon and a knight.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
LOGPROB_TOKENS = 256
COMMAND = "uv run --frozen --no-sync python -m benchmarks embedded_weights"


def _files() -> dict[str, Path]:
    source = shipped_model_path()
    cache = default_model_cache_dir()
    return {
        "Q4_1": source,
        "Q8_0": converted_model(source, cache, gguf.GGMLQuantizationType.Q8_0),
        "F16": converted_model(source, cache, gguf.GGMLQuantizationType.F16),
    }


def _ids(runtime: LlamaRuntime, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(i) for i in rng.integers(100, runtime.n_vocab, n)]


def decode_rate(runtime: LlamaRuntime, n_seq: int, seed: int) -> float:
    """Generated ids per second of ``n_seq`` sequences decoding together (greedy)."""
    runtime.clear()
    prompts = [_ids(runtime, 16, seed + s) for s in range(n_seq)]
    rows = runtime.decode([(s, prompts[s], True) for s in range(n_seq)])
    last = [int(np.argmax(runtime.logits(r))) for r in rows]
    started = time.perf_counter()
    for _ in range(STEPS):
        rows = runtime.decode([(s, (last[s],), True) for s in range(n_seq)])
        last = [int(np.argmax(runtime.logits(r))) for r in rows]
    return n_seq * STEPS / (time.perf_counter() - started)


def prompt_rate(runtime: LlamaRuntime, seed: int) -> float:
    """Prompt ids evaluated per second (512 ids from an empty sequence)."""
    runtime.clear()
    ids = _ids(runtime, PROMPT_IDS, seed)
    started = time.perf_counter()
    runtime.feed(ids)
    return PROMPT_IDS / (time.perf_counter() - started)


def logprob_change(files: dict[str, Path]) -> dict[str, tuple[float, float]]:
    """Mean and max |Δ raw logprob| against Q4_1 of every token of a text the Q4_1 model
    sampled (temperature 1, seed 0), teacher-forced on each file."""
    source = LlamaRuntime(files["Q4_1"], n_ctx=1024, n_threads=THREADS)
    try:
        ids = source.tokenize(LOGPROB_PROMPT)
        rng = np.random.default_rng(0)
        logits = source.feed(ids)
        for _ in range(LOGPROB_TOKENS):
            scaled = np.exp(logits.astype(np.float64) - logits.max())
            token = int(rng.choice(len(scaled), p=scaled / scaled.sum()))
            ids.append(token)
            logits = source.feed_one(token)
    finally:
        source.close()
    scored = {}
    for name, path in files.items():
        with LlamaRuntime(path, n_ctx=1024, n_threads=THREADS) as runtime:
            rows = runtime.feed(ids, rows_from=0)[:-1].astype(np.float64)
        rows -= rows.max(axis=1, keepdims=True)
        logprobs = rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))
        scored[name] = logprobs[np.arange(len(ids) - 1), ids[1:]]
    return {
        name: (float(np.abs(v - scored["Q4_1"]).mean()), float(np.abs(v - scored["Q4_1"]).max()))
        for name, v in scored.items()
        if name != "Q4_1"
    }


def measure(rounds: int) -> tuple[dict[str, int], dict[str, dict[str, list[float]]]]:
    files = _files()
    sizes = {name: path.stat().st_size for name, path in files.items()}
    runtimes = {
        name: LlamaRuntime(path, n_ctx=1024, n_seq=SEQS, n_threads=THREADS)
        for name, path in files.items()
    }
    rates: dict[str, dict[str, list[float]]] = {
        name: {"decode 1": [], f"decode {SEQS}": [], "prompt": []} for name in files
    }
    try:
        for runtime in runtimes.values():  # warm-up
            decode_rate(runtime, 1, 0)
            prompt_rate(runtime, 0)
        for rnd in range(rounds):
            for name, runtime in runtimes.items():
                rates[name]["decode 1"].append(decode_rate(runtime, 1, rnd))
                rates[name][f"decode {SEQS}"].append(decode_rate(runtime, SEQS, rnd))
                rates[name]["prompt"].append(prompt_rate(runtime, rnd))
    finally:
        for runtime in runtimes.values():
            runtime.close()
    return sizes, rates


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_embedded_weights [ROUNDS]``."""
    rounds = int(argv[0]) if argv else DEFAULT_ROUNDS
    load = os.getloadavg()[0]
    sizes, rates = measure(rounds)
    change = logprob_change(_files())
    base = rates["Q4_1"]
    rows = []
    for name, measured in rates.items():
        cells = []
        for kind, values in measured.items():
            ratio = statistics.median(v / b for v, b in zip(values, base[kind], strict=True))
            cells.append(f"{statistics.median(values):.0f} ({ratio:.2f}x)")
        rows.append(f"| {name} | {sizes[name] / 2**20:.0f} | " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    change_rows = "\n".join(
        f"| {name} | {mean:.4f} | {high:.3f} |" for name, (mean, high) in change.items()
    )
    body = f"""
The runtime the backend uses (`LlamaRuntime`: one KV stream per sequence, q8_0 K/V cache, flash
attention, 32-id micro-batches), {THREADS} thread, on the shipped SmolLM2-135M-Instruct Q4_1
GGUF and its two conversions (`hermes_loop.embedded.converted_model`; only the Q4_1 matrices
change, the Q8_0 embedding and the F32 norms are copied). Decode: {STEPS} greedy steps of 1 or
{SEQS} sequences (ids/s over all sequences); prompt: {PROMPT_IDS} ids from an empty sequence.
{rounds} interleaved rounds; median ids/s and (median of the per-round ratios to Q4_1). Load
average (1 min) at the start: {load:.2f}.

| weights | file (MiB) | decode N=1 | decode N={SEQS} | prompt |
|---|---:|---:|---:|---:|
{table}

Teacher-forced raw logprobs of the {LOGPROB_TOKENS} tokens the Q4_1 model sampled after a chat
prompt (temperature 1, seed 0), against Q4_1's own:

| weights | mean abs change (nats) | max abs change |
|---|---:|---:|
{change_rows}
"""
    write_section(
        "embedded_weights",
        "hermes-loop: the embedded runtime on Q4_1 vs its Q8_0 and F16 conversions",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
