"""How batch-dependent are the embedded model's logprobs? Recorded vs a fresh recompute.

The apps' traffic on one backend with N sequences: groups of 2 rollouts sharing a long system
prompt and a task, 2 turns each (the second turn's prompt extends the first), in 3 waves that
reuse the sequences the previous wave freed, temperature 1, raw logprobs recorded. Every
generation is then recomputed teacher-forced in a fresh one-sequence runtime (what a trainer
does) and compared token by token:

    uv run --frozen --no-sync python -m benchmarks.embedded_invariance [N] [TOKENS]

Prints max and mean |delta logprob| and how many generations differ by more than 1e-4.
"""

from __future__ import annotations

import sys

import anyio
from hermes_loop.embedded import EmbeddedModel
from hermes_protocols import Generation, Message, SamplingParams

SYSTEM = " ".join(f"Rule {i}: always check the file named data{i}.txt first." for i in range(60))
TASKS = ("count the lines of a.txt", "find the largest file", "print the date", "list users")
WAVES, TURNS = 3, 2


async def measure(n: int, tokens: int) -> dict[str, float]:
    records: list[tuple[list[int], Generation]] = []
    async with await EmbeddedModel.open(n_ctx=2048, concurrency=n) as model:
        tokenizer, template = model.tokenizer, model.template

        async def rollout(task: str, seed: int) -> None:
            messages = [Message.system(SYSTEM), Message.user(task)]
            for turn in range(TURNS):
                prompt = tokenizer.encode(template.render(messages, add_generation_prompt=True))
                params = SamplingParams(
                    temperature=1.0, max_tokens=tokens, seed=seed * TURNS + turn, logprob_mode="raw"
                )
                generation = await model.backend.generate(prompt, sampling=params)
                records.append((prompt, generation))
                reply = Message.assistant(tokenizer.decode(generation.ids))
                messages = [*messages, reply, Message.user("Continue.")]

        for wave in range(WAVES):
            async with anyio.create_task_group() as group:
                for member in range(n):
                    task = TASKS[(wave + member // 2) % len(TASKS)]
                    group.start_soon(rollout, task, wave * n + member)
    deltas: list[float] = []
    off = 0
    async with await EmbeddedModel.open(n_ctx=2048, concurrency=1) as fresh:
        for prompt, generation in records:
            fresh.backend.runtime.clear()
            reference = await fresh.backend.score([*prompt, *generation.ids], start=len(prompt))
            these = [abs(a - b) for a, b in zip(reference, generation.logprobs, strict=True)]
            deltas += these
            off += max(these) > 1e-4
    return {
        "sequences": n,
        "generations": len(records),
        "tokens": len(deltas),
        "max_abs_delta": max(deltas),
        "mean_abs_delta": sum(deltas) / len(deltas),
        "generations_off": off,
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    print(anyio.run(measure, n, tokens))


if __name__ == "__main__":
    main()
