"""Embedded model under concurrency: aggregate generated tokens/s vs llama.cpp's own batching.

Same GGUF (the default model: SmolLM2-135M-Instruct converted to Q8_0; or the file named on the
command line), same chat prompt, same thread count, same run. For each concurrency N in
(1, 8, 16):

* baseline: llama.cpp's batched decoding through llama-cpp-python's low-level API, as
  llama.cpp's ``examples/batched`` does it: one context with ``n_seq_max = N`` (unified KV
  cache, llama.cpp's default f16 cache, flash attention auto, n_ubatch 512), the prompt
  evaluated once for all N sequences, then one ``llama_decode`` per step carrying one token
  of every unfinished sequence, each sampled by llama.cpp's own sampler chain (temperature 1,
  full vocabulary); a sequence ends at an end-of-generation id or after TOKENS tokens;
* ours: N concurrent ``EmbeddedTokenBackend.generate`` calls (concurrency N, temperature 1,
  TOKENS max, exact logprobs) on the continuous-batching scheduler.

Rate = generated tokens / wall time (prompt evaluation included). Rounds are interleaved
(baseline, ours) so load on the shared machine hits both alike; medians and the median of the
per-round ratios are reported. Resident memory is measured in a fresh process per
configuration (model + KV cache of N sequences of n_ctx tokens).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

import anyio
import llama_cpp
from hermes_loop.embedded import (
    EmbeddedModel,
    EmbeddedTokenBackend,
    default_threads,
    resolve_model_path,
)
from hermes_protocols import Message, SamplingParams

from benchmarks.report import write_section

TOKENS = 128
CONCURRENCY = (1, 8, 16)
N_CTX = 1024  # per sequence
COMMAND = "uv run --frozen --no-sync python -m benchmarks embedded_batching"
PROMPT = "Write a very long story about a dragon and a knight."


@dataclasses.dataclass(frozen=True)
class Settings:
    """``threads``: llama.cpp threads for both engines (None: default_threads(), the physical
    cores); ``rounds``: interleaved rounds; ``model``: the GGUF both load (None: the default)."""

    threads: int | None = None
    rounds: int = 3
    model: str | None = None


class Baseline:
    """llama.cpp's batched decoding (examples/batched) on one context of ``n`` sequences."""

    def __init__(self, path: str, n: int, threads: int) -> None:
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        ctx_params = llama_cpp.llama_context_default_params()
        ctx_params.n_ctx = N_CTX * n
        ctx_params.n_batch = max(512, n)
        ctx_params.n_seq_max = n
        ctx_params.kv_unified = True
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(self.model, ctx_params)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n = n
        self.batch = llama_cpp.llama_batch_init(max(512, n), 0, n)

    def run(self, prompt: list[int], seed: int) -> int:
        """Generate up to TOKENS ids in each of the n sequences; return how many in total."""
        n, batch = self.n, self.batch
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        samplers = []
        for i in range(n):
            chain = llama_cpp.llama_sampler_chain_init(
                llama_cpp.llama_sampler_chain_default_params()
            )
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(1.0))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed + i))
            samplers.append(chain)
        batch.n_tokens = len(prompt)
        for pos, token in enumerate(prompt):
            batch.token[pos], batch.pos[pos], batch.logits[pos] = token, pos, 0
            batch.n_seq_id[pos] = n
            for s in range(n):
                batch.seq_id[pos][s] = s
        batch.logits[len(prompt) - 1] = 1
        assert llama_cpp.llama_decode(self.ctx, batch) == 0
        rows = [len(prompt) - 1] * n
        produced = [0] * n
        position = len(prompt)
        while any(r >= 0 for r in rows):
            batch.n_tokens = 0
            for s in range(n):
                if rows[s] < 0:
                    continue
                token = llama_cpp.llama_sampler_sample(samplers[s], self.ctx, rows[s])
                produced[s] += 1
                if llama_cpp.llama_vocab_is_eog(self.vocab, token) or produced[s] >= TOKENS:
                    rows[s] = -1
                    continue
                i = batch.n_tokens
                batch.token[i], batch.pos[i], batch.logits[i] = token, position, 1
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = s
                rows[s] = i
                batch.n_tokens += 1
            if batch.n_tokens:
                assert llama_cpp.llama_decode(self.ctx, batch) == 0
            position += 1
        for chain in samplers:
            llama_cpp.llama_sampler_free(chain)
        return sum(produced)

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)


async def ours(backend: EmbeddedTokenBackend, prompt: list[int], n: int, seed: int) -> int:
    counts = [0] * n

    async def one(i: int) -> None:
        sampling = SamplingParams(temperature=1.0, max_tokens=TOKENS, seed=seed + i)
        counts[i] = len((await backend.generate(prompt, sampling=sampling)).ids)

    async with anyio.create_task_group() as group:
        for i in range(n):
            group.start_soon(one, i)
    return sum(counts)


async def measure(settings: Settings) -> dict[int, dict[str, list[float]]]:
    threads = settings.threads or default_threads()
    results: dict[int, dict[str, list[float]]] = {}
    for n in CONCURRENCY:
        rates: dict[str, list[float]] = {"baseline": [], "ours": [], "ratio": []}
        async with await EmbeddedModel.open(
            settings.model, n_ctx=N_CTX, concurrency=n, n_threads=threads
        ) as model:
            text = model.template.render([Message.user(PROMPT)], add_generation_prompt=True)
            prompt = model.tokenizer.encode(text)
            baseline = await anyio.to_thread.run_sync(Baseline, str(model.path), n, threads)
            try:
                await anyio.to_thread.run_sync(baseline.run, prompt, 99)  # warm-up
                await ours(model.backend, prompt, n, 99)
                for rnd in range(settings.rounds):
                    started = time.perf_counter()
                    count = await anyio.to_thread.run_sync(baseline.run, prompt, rnd * 100)
                    rates["baseline"].append(count / (time.perf_counter() - started))
                    started = time.perf_counter()
                    count = await ours(model.backend, prompt, n, rnd * 100)
                    rates["ours"].append(count / (time.perf_counter() - started))
                    rates["ratio"].append(rates["ours"][-1] / rates["baseline"][-1])
            finally:
                baseline.close()
        results[n] = rates
    return results


def resident_mib(n: int, n_ctx: int, model: str | None) -> dict[str, float]:
    """VmRSS of a fresh process before / after opening the model at concurrency ``n``."""
    code = (
        "import anyio, json, sys\n"
        "from benchmarks.bench_embedded_batching import _rss_probe\n"
        f"print(json.dumps(anyio.run(_rss_probe, {n}, {n_ctx}, {model!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _vm_rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _rss_probe(n: int, n_ctx: int, model: str | None) -> dict[str, float]:
    before = _vm_rss_mib()
    async with await EmbeddedModel.open(model, n_ctx=n_ctx, concurrency=n) as embedded:
        prompt = embedded.tokenizer.encode(PROMPT)
        await embedded.backend.generate(prompt, sampling=SamplingParams(max_tokens=4, seed=0))
        after = _vm_rss_mib()
    return {"before": before, "after": after}


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.bench_embedded_batching [THREADS [ROUNDS [MODEL.gguf]]]``
    (THREADS 0: the physical cores)."""
    args = argv or []
    settings = Settings(
        threads=(int(args[0]) or None) if args else None,
        rounds=int(args[1]) if len(args) > 1 else Settings.rounds,
        model=args[2] if len(args) > 2 else None,
    )
    load = os.getloadavg()[0]
    # converts the default model once, if needed
    model_name = resolve_model_path(settings.model).name
    results = anyio.run(measure, settings)
    threads = settings.threads or default_threads()
    memory = {
        (n, ctx): resident_mib(n, ctx, settings.model)
        for n, ctx in ((1, 2048), (16, 2048), (16, 4096))
    }
    rows = []
    for n, rates in results.items():
        base, mine = statistics.median(rates["baseline"]), statistics.median(rates["ours"])
        ratio = statistics.median(rates["ratio"])
        runs = ", ".join(
            f"{b:.0f}/{o:.0f}" for b, o in zip(rates["baseline"], rates["ours"], strict=True)
        )
        rows.append(f"| {n} | {base:.1f} | {mine:.1f} | **{ratio:.2f}** | {runs} |")
    mem_rows = [
        f"| {n} | {ctx} | {m['after']:.0f} | {m['after'] - m['before']:.0f} |"
        for (n, ctx), m in memory.items()
    ]
    table = "\n".join(rows)
    mem_table = "\n".join(mem_rows)
    body = f"""
Aggregate generated tokens/s of N concurrent rollouts on one `EmbeddedTokenBackend`
(concurrency N, continuous batching, exact logprobs) against llama.cpp's own batched decoding of
N sequences (`examples/batched` through llama-cpp-python's low-level API: prompt evaluated
once, one `llama_decode` per step with a token of every sequence, llama.cpp's C sampler).
`{model_name}`, chat prompt "{PROMPT}", up to {TOKENS} tokens per sequence at
temperature 1 (both end a sequence at an end-of-generation id), {threads} thread(s),
{N_CTX} tokens of context per sequence; {settings.rounds} interleaved rounds, median tokens/s
and the median of the per-round ratios. Prompt evaluation is included in the time. Load average
(1 min) at the start: {load:.2f}.

| N | llama.cpp batched (tok/s) | hermes (tok/s) | ratio | rounds (baseline/ours) |
|---|---|---|---|---|
{table}

Resident memory (fresh process: model + KV cache of N sequences of n_ctx tokens, q8_0):

| N | n_ctx per sequence | VmRSS (MiB) | added by the model (MiB) |
|---|---|---|---|
{mem_table}

The machine is shared by other jobs; the ratios are the meaningful numbers.
"""
    write_section(
        "embedded_batching",
        "hermes-loop: embedded model under concurrency (continuous batching)",
        COMMAND,
        body,
    )
    print(body)


if __name__ == "__main__":
    main(sys.argv[1:])
