"""How batch-dependent are the embedded model's logprobs? Recorded vs teacher-forced recompute.

N rollouts generate at once on one backend (continuous batching: their decode steps and prompt
chunks share ``llama_decode`` calls, their cells share the KV cache), recording raw logprobs.
Each sequence is then recomputed in one teacher-forced pass from an empty sequence (what a
trainer does) and compared token by token:

    uv run --frozen --no-sync python -m benchmarks.embedded_invariance [N] [TOKENS]

Prints max and mean |delta logprob| and how many ids a solo (``deterministic``) run changes.
"""

from __future__ import annotations

import sys

import anyio
from hermes_loop.embedded import EmbeddedModel, EmbeddedTokenBackend
from hermes_protocols import Generation, Message, SamplingParams

TOPICS = ("a dragon", "the sea", "a robot", "winter", "a city", "music", "a forest", "time")


async def measure(n: int, tokens: int) -> dict[str, float]:
    async with await EmbeddedModel.open(n_ctx=1024, concurrency=n) as model:
        prompts = [
            model.tokenizer.encode(
                model.template.render(
                    [Message.user(f"Write a long story about {TOPICS[i % len(TOPICS)]}.")],
                    add_generation_prompt=True,
                )
            )
            for i in range(n)
        ]
        params = [
            SamplingParams(temperature=1.0, max_tokens=tokens, seed=i, logprob_mode="raw")
            for i in range(n)
        ]
        batched: list[Generation | None] = [None] * n

        async def one(i: int) -> None:
            batched[i] = await model.backend.generate(prompts[i], sampling=params[i])

        async with anyio.create_task_group() as group:
            for i in range(n):
                group.start_soon(one, i)
        deltas: list[float] = []
        changed = 0
        solo = EmbeddedTokenBackend(model.backend.runtime, deterministic=True)
        for i, generation in enumerate(batched):
            assert generation is not None
            ids = [*prompts[i], *generation.ids]
            reference = await model.backend.score(ids, start=len(prompts[i]))
            deltas += [abs(a - b) for a, b in zip(reference, generation.logprobs, strict=True)]
            model.backend.runtime.clear()
            again = await solo.generate(prompts[i], sampling=params[i])
            changed += again.ids != generation.ids
    return {
        "sequences": n,
        "tokens": len(deltas),
        "max_abs_delta": max(deltas),
        "mean_abs_delta": sum(deltas) / len(deltas),
        "solo_runs_with_other_ids": changed,
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(anyio.run(measure, n, tokens))


if __name__ == "__main__":
    main()
