"""Embedded model: decode tokens/s of EmbeddedTokenBackend vs llama-cpp-python's own loops.

Same GGUF (the default: SmolLM2-135M-Instruct converted to Q8_0), same prompt, same thread
count, same run. Baselines:

* ``Llama.generate``: llama-cpp-python's raw generation loop (its C sampler, no logprobs);
* ``Llama.create_completion(logprobs=1)`` on a ``logits_all=True`` model: its logprob path.

Our backend always returns exact logprobs, so it is compared against both. Runs are
interleaved (raw, ours, logprob path) so that load on the machine hits all three alike.
"""

from __future__ import annotations

import statistics
import time

import anyio
import llama_cpp
from hermes_loop.embedded import EmbeddedModel, default_threads
from hermes_protocols import Message, SamplingParams

from benchmarks.report import write_section

RUNS = 3
TOKENS = 128
#: llama-cpp-python's logits_all path is ~4x slower; fewer tokens keep the run under 3 minutes
LOGPROB_PATH_TOKENS = 48
N_CTX = 2048


def raw_loop(llama: llama_cpp.Llama, prompt: list[int]) -> float:
    """Tokens/s of llama-cpp-python's generate loop (pure sampling at temperature 1)."""
    started = time.perf_counter()
    count = 0
    for _ in llama.generate(
        prompt, top_k=0, top_p=1.0, min_p=0.0, temp=1.0, repeat_penalty=1.0, reset=True
    ):
        count += 1
        if count == TOKENS:
            break
    return count / (time.perf_counter() - started)


def logprob_path(llama: llama_cpp.Llama, prompt: list[int], seed: int, tokens: int) -> float:
    """Tokens/s of llama-cpp-python's completion API with logprobs (logits_all=True)."""
    started = time.perf_counter()
    result = llama.create_completion(
        prompt,
        max_tokens=tokens,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        min_p=0.0,
        repeat_penalty=1.0,
        logprobs=1,
        seed=seed,
    )
    elapsed = time.perf_counter() - started
    return int(result["usage"]["completion_tokens"]) / elapsed  # type: ignore[index]


async def measure() -> dict[str, list[float]]:
    threads = default_threads()
    results: dict[str, list[float]] = {"raw": [], "ours": [], "logprobs": [], "ours_tokens": []}
    async with await EmbeddedModel.open(n_ctx=N_CTX, n_threads=threads) as model:
        text = model.template.render(
            [Message.user("Write a very long story about a dragon and a knight.")],
            add_generation_prompt=True,
        )
        prompt = model.tokenizer.encode(text)
        path = str(model.path)
        raw = llama_cpp.Llama(path, n_ctx=N_CTX, n_threads=threads, verbose=False, seed=1)
        full = llama_cpp.Llama(
            path, n_ctx=N_CTX, n_threads=threads, logits_all=True, verbose=False, seed=1
        )
        # warm-up: every engine evaluates the prompt once, so runs measure decoding
        raw_loop(raw, prompt)
        logprob_path(full, prompt, 0, 1)
        await model.backend.generate(prompt, sampling=SamplingParams(max_tokens=1))
        for run in range(RUNS):
            results["raw"].append(raw_loop(raw, prompt))
            sampling = SamplingParams(temperature=1.0, max_tokens=TOKENS, seed=run)
            started = time.perf_counter()
            generation = await model.backend.generate(prompt, sampling=sampling)
            elapsed = time.perf_counter() - started
            results["ours"].append(len(generation.ids) / elapsed)
            results["ours_tokens"].append(len(generation.ids))
            results["logprobs"].append(logprob_path(full, prompt, run, LOGPROB_PATH_TOKENS))
        raw.close()
        full.close()
    return results


def main() -> None:
    results = anyio.run(measure)
    raw = statistics.median(results["raw"])
    ours = statistics.median(results["ours"])
    logprobs = statistics.median(results["logprobs"])
    tokens = ", ".join(str(int(n)) for n in results["ours_tokens"])
    runs = {key: ", ".join(f"{v:.1f}" for v in values) for key, values in results.items()}
    body = f"""
Decode speed of `EmbeddedTokenBackend.generate` (numpy log-softmax + sampling, exact logprobs
always on) against llama-cpp-python on the same GGUF (the default SmolLM2-135M-Instruct,
Q8_0), same chat prompt, {default_threads()} thread(s), n_ctx {N_CTX}; {RUNS} interleaved runs
of up to {TOKENS} tokens at temperature 1 ({LOGPROB_PATH_TOKENS} for the slow `logits_all`
path); median tokens/s. Our runs produced {tokens} tokens (they end early only at EOS). The
prompt is cached by every engine, so the numbers are decode speed.

| engine | tokens/s (median) | runs |
|---|---|---|
| llama-cpp-python `Llama.generate` (raw loop) | {raw:.1f} | {runs["raw"]} |
| llama-cpp-python `create_completion(logprobs=1)` | {logprobs:.1f} | {runs["logprobs"]} |
| hermes `EmbeddedTokenBackend` (logprobs on) | {ours:.1f} | {runs["ours"]} |

- ratio ours / raw loop: **{ours / raw:.2f}** (target >= 0.9)
- ratio ours / llama-cpp-python with logprobs: **{ours / logprobs:.2f}**

The machine is shared by other jobs; ratios are the meaningful numbers.
"""
    write_section(
        "embedded",
        "hermes-loop: embedded llama.cpp token backend",
        "uv run --frozen --no-sync python -m benchmarks embedded",
        body,
    )


if __name__ == "__main__":
    main()
