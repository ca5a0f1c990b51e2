"""The embedded runtime on the shipped Q4_1 SmolLM2 against its Q8_0 and F16 conversions, on
the workspace's patched llama.cpp and, as the baseline, on stock llama-cpp-python.

Same runtime settings as the backend (``LlamaRuntime``: one KV stream per sequence, q8_0 K/V
cache, flash attention, 32-id micro-batches), same ids, same thread count. Three measurements
per file, in interleaved rounds (stock Q4_1 and Q8_0 in a child process on
``benchmarks.stock_llama``'s build, then Q4_1, Q8_0 and F16 here, then again):

* decode N = 1: one sequence, one id per ``llama_decode`` (greedy ids fed back);
* decode N = 8: 8 sequences, one id of each per ``llama_decode``;
* prompt: a 512-id and a 960-id prompt (an agent turn's length) evaluated from an empty
  sequence (the last row of logits only).

Medians over the rounds and the median of the per-round ratios to stock Q4_1.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from hermes_loop.embedded import LlamaRuntime, converted_model, shipped_model_path
from hermes_loop.embedded.model_convert import default_model_cache_dir

from benchmarks.report import write_section
from benchmarks.stock_llama import print_answer, run_child

#: interleaved rounds unless the command line gives another count
DEFAULT_ROUNDS = 5
STEPS = 64
#: prompt lengths measured: a short prompt, and an agent turn's (about 900 ids; issue 27)
PROMPT_IDS = (512, 960)
SEQS = 8
#: llama.cpp threads (1: the number that does not depend on what else runs on the machine)
THREADS = 1
LOGPROB_PROMPT = (
    "<|im_start|>user\nWrite a short story about a dragon and a knight.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
LOGPROB_TOKENS = 256
COMMAND = "uv run --frozen --no-sync python -m benchmarks embedded_weights"
#: the files measured on stock llama-cpp-python too
STOCK_FILES = ("Q4_1", "Q8_0")
#: a stock child process may take this long
CHILD_TIMEOUT_S = 900


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


def prompt_rate(runtime: LlamaRuntime, n: int, seed: int) -> float:
    """Prompt ids evaluated per second (``n`` ids from an empty sequence)."""
    runtime.clear()
    ids = _ids(runtime, n, seed)
    started = time.perf_counter()
    runtime.feed(ids)
    return n / (time.perf_counter() - started)


def sampled_text(source_file: Path) -> list[int]:
    """A chat prompt and the ``LOGPROB_TOKENS`` ids the model sampled after it (temperature 1,
    seed 0)."""
    with LlamaRuntime(source_file, n_ctx=1024, n_threads=THREADS) as source:
        ids = source.tokenize(LOGPROB_PROMPT)
        rng = np.random.default_rng(0)
        logits = source.feed(ids)
        for _ in range(LOGPROB_TOKENS):
            scaled = np.exp(logits.astype(np.float64) - logits.max())
            token = int(rng.choice(len(scaled), p=scaled / scaled.sum()))
            ids.append(token)
            logits = source.feed_one(token)
    return ids


def teacher_forced(files: dict[str, Path], ids: list[int]) -> dict[str, list[float]]:
    """Each file's raw logprob of every id of ``ids`` after the first."""
    scored = {}
    for name, path in files.items():
        with LlamaRuntime(path, n_ctx=1024, n_threads=THREADS) as runtime:
            rows = runtime.feed(ids, rows_from=0)[:-1].astype(np.float64)
        rows -= rows.max(axis=1, keepdims=True)
        logprobs = rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))
        scored[name] = [float(v) for v in logprobs[np.arange(len(ids) - 1), ids[1:]]]
    return scored


def open_runtimes(files: dict[str, Path]) -> dict[str, LlamaRuntime]:
    """One warmed-up runtime per file."""
    runtimes = {
        name: LlamaRuntime(path, n_ctx=1024, n_seq=SEQS, n_threads=THREADS)
        for name, path in files.items()
    }
    for runtime in runtimes.values():
        decode_rate(runtime, 1, 0)
        prompt_rate(runtime, PROMPT_IDS[0], 0)
    return runtimes


def measure_round(runtimes: dict[str, LlamaRuntime], rnd: int) -> dict[str, dict[str, float]]:
    """Decode N=1, decode N=SEQS and prompt ids/s of each runtime, seeded by the round."""
    return {
        name: {
            "decode 1": decode_rate(runtime, 1, rnd),
            f"decode {SEQS}": decode_rate(runtime, SEQS, rnd),
            **{f"prompt {n}": prompt_rate(runtime, n, rnd) for n in PROMPT_IDS},
        }
        for name, runtime in runtimes.items()
    }


def _stock(*args: str) -> Any:
    """This module's child mode ``args`` on stock llama-cpp-python; its answer."""
    return run_child(__spec__.name, args, stock=True, timeout_s=CHILD_TIMEOUT_S)


def measure(rounds: int) -> dict[str, dict[str, list[float]]]:
    """Interleaved rounds: stock Q4_1 and Q8_0 in a child process, then the workspace's build
    on every file."""
    files = _files()
    stock_names = {f"stock {name}": name for name in STOCK_FILES}
    rates: dict[str, dict[str, list[float]]] = {}
    runtimes = open_runtimes(files)
    try:
        for rnd in range(rounds):
            stock = _stock("--rates", str(rnd))
            measured = {label: stock[name] for label, name in stock_names.items()}
            measured.update(measure_round(runtimes, rnd))
            for label, kinds in measured.items():
                for kind, value in kinds.items():
                    rates.setdefault(label, {}).setdefault(kind, []).append(value)
    finally:
        for runtime in runtimes.values():
            runtime.close()
    return rates


def _child(mode: str, arg: str) -> None:
    """``--rates ROUND`` or ``--logprobs IDS.json`` on ``STOCK_FILES``; the answer on stdout."""
    files = {name: path for name, path in _files().items() if name in STOCK_FILES}
    result: Any
    if mode == "--rates":
        runtimes = open_runtimes(files)
        try:
            result = measure_round(runtimes, int(arg))
        finally:
            for runtime in runtimes.values():
                runtime.close()
    else:
        result = teacher_forced(files, json.loads(Path(arg).read_text()))
    print_answer(result)


def logprob_change(ids_file: Path) -> dict[str, tuple[float, float]]:
    """Mean and max |Δ raw logprob| of every token of a text the Q4_1 model sampled, teacher-
    forced: each file on the workspace's build against Q4_1 there, and each stock file against
    the same file on the workspace's build."""
    files = _files()
    ids = sampled_text(files["Q4_1"])
    ids_file.write_text(json.dumps(ids))
    ours = {name: np.array(v) for name, v in teacher_forced(files, ids).items()}
    stock = {name: np.array(v) for name, v in _stock("--logprobs", str(ids_file)).items()}
    pairs = {f"{name} vs Q4_1": (ours[name], ours["Q4_1"]) for name in files if name != "Q4_1"}
    pairs.update({f"{name} vs stock {name}": (ours[name], stock[name]) for name in stock})
    return {
        label: (float(np.abs(a - b).mean()), float(np.abs(a - b).max()))
        for label, (a, b) in pairs.items()
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_embedded_weights [ROUNDS]``."""
    if argv and argv[0] in ("--rates", "--logprobs"):
        _child(*argv)
        return
    rounds = int(argv[0]) if argv else DEFAULT_ROUNDS
    load = os.getloadavg()[0]
    sizes = {name: path.stat().st_size for name, path in _files().items()}
    rates = measure(rounds)
    with tempfile.TemporaryDirectory() as tmp:
        change = logprob_change(Path(tmp) / "ids.json")
    base = rates["stock Q4_1"]
    rows = []
    for label, measured in rates.items():
        cells = []
        for kind, values in measured.items():
            ratio = statistics.median(v / b for v, b in zip(values, base[kind], strict=True))
            cells.append(f"{statistics.median(values):.0f} ({ratio:.2f}x)")
        size = sizes[label.removeprefix("stock ")] / 2**20
        rows.append(f"| {label} | {size:.0f} | " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    change_rows = "\n".join(
        f"| {label} | {mean:.4f} | {high:.3f} |" for label, (mean, high) in change.items()
    )
    prompts = " | ".join(f"prompt {n}" for n in PROMPT_IDS)
    body = f"""
The runtime the backend uses (`LlamaRuntime`: one KV stream per sequence, q8_0 K/V cache, flash
attention, 32-id micro-batches), {THREADS} thread, on the shipped SmolLM2-135M-Instruct Q4_1
GGUF and its two conversions (`hermes_loop.embedded.converted_model`; only the Q4_1 matrices
change, the Q8_0 embedding and the F32 norms are copied), with the workspace's llama.cpp
(third_party/llama-cpp-python: its q8_0 flash-attention loop) and, as the baseline, with stock
llama-cpp-python in a child process (`benchmarks.stock_llama`; "stock" rows). Decode: {STEPS}
greedy steps of 1 or {SEQS} sequences (ids/s over all sequences); prompt: {PROMPT_IDS[0]} and
{PROMPT_IDS[1]} ids (an agent turn's prompt length) from an empty sequence. {rounds} interleaved
rounds; median ids/s and (median of the per-round ratios to stock Q4_1, the path before issue
27). Load average (1 min) at the start: {load:.2f}.

| weights | file (MiB) | decode N=1 | decode N={SEQS} | {prompts} |
|---|---:|---:|---:|---:|---:|
{table}

Teacher-forced raw logprobs of the {LOGPROB_TOKENS} tokens the Q4_1 model sampled after a chat
prompt (temperature 1, seed 0): each file against Q4_1 on the workspace's build (what the
weights change), and each file on the workspace's build against the same file on stock
llama.cpp (what the attention loop's float order changes):

| comparison | mean abs change (nats) | max abs change |
|---|---:|---:|
{change_rows}
"""
    write_section(
        "embedded_weights",
        "hermes-loop: the embedded runtime on Q4_1 vs its Q8_0 and F16 conversions, stock and "
        "patched llama.cpp",
        COMMAND,
        body,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
