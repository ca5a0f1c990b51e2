"""Continuous batching on the real SmolLM2 model: several sequences in shared decode calls.

One runtime with 4 KV-cache sequences is loaded for the module. Each test wraps it in fresh
backends (a scheduler each) and empties the cache first.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import numpy as np
import pytest
from hermes_loop.embedded import (
    EmbeddedTokenBackend,
    GGUFTokenizer,
    LlamaRuntime,
    default_model_path,
)
from hermes_protocols import Generation, Message, SamplingParams

pytestmark = pytest.mark.slow

TOPICS = ("cats", "the sea", "a robot", "winter")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def runtime() -> Iterator[LlamaRuntime]:
    with LlamaRuntime(default_model_path(), n_ctx=1024, n_seq=4, n_threads=2) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def tokenizer() -> GGUFTokenizer:
    return GGUFTokenizer.from_gguf(default_model_path())


def prompt(tokenizer: GGUFTokenizer, text: str, system: str = "You are helpful.") -> list[int]:
    rendered = tokenizer.chat_template().render(
        [Message.system(system), Message.user(text)], add_generation_prompt=True
    )
    return tokenizer.encode(rendered)


def sampling(seed: int, max_tokens: int = 16) -> SamplingParams:
    return SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=seed, logprob_mode="raw")


async def generate_all(
    backend: EmbeddedTokenBackend, prompts: list[list[int]], max_tokens: int = 16
) -> list[Generation]:
    results: list[Generation | None] = [None] * len(prompts)

    async def one(index: int) -> None:
        results[index] = await backend.generate(
            prompts[index], sampling=sampling(index, max_tokens)
        )

    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for index in range(len(prompts)):
                group.start_soon(one, index)
    return [r for r in results if r is not None]


@pytest.mark.anyio
async def test_batched_generations_equal_solo_ones_and_the_teacher_forced_recompute(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    prompts = [prompt(tokenizer, f"Write about {topic}.") for topic in TOPICS]
    runtime.clear()
    batched_backend = EmbeddedTokenBackend(runtime)
    batched = await generate_all(batched_backend, prompts)
    scheduler = batched_backend.scheduler
    assert scheduler.step_tokens > scheduler.steps  # decode calls carried several sequences
    runtime.clear()
    solo_backend = EmbeddedTokenBackend(runtime, deterministic=True)
    for index, ids in enumerate(prompts):
        solo = await solo_backend.generate(ids, sampling=sampling(index))
        # llama.cpp runs batch-invariant here (q8_0 cache, flash attention): bitwise equal
        assert solo.ids == batched[index].ids
        assert solo.logprobs == batched[index].logprobs
        reference = await solo_backend.score([*ids, *solo.ids], start=len(ids))
        assert reference == pytest.approx(list(solo.logprobs), abs=1e-6)


@pytest.mark.anyio
async def test_a_fixed_seed_at_concurrency_one_reproduces_the_ids(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    ids = prompt(tokenizer, "Tell me a story.")
    params = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=24, seed=1234)
    outcomes = []
    for _ in range(2):
        runtime.clear()
        backend = EmbeddedTokenBackend(runtime)
        outcomes.append(await backend.generate(ids, sampling=params))
    assert outcomes[0].ids == outcomes[1].ids
    assert outcomes[0].logprobs == outcomes[1].logprobs


@pytest.mark.anyio
async def test_each_rollout_keeps_its_prefix_and_groups_share_theirs(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    runtime.clear()
    backend = EmbeddedTokenBackend(runtime)
    system = "You are a careful assistant. " * 12
    first = [prompt(tokenizer, f"Describe {topic}.", system) for topic in TOPICS[:2]]
    turns = await generate_all(backend, first, max_tokens=6)
    bridge = tokenizer.encode("<|im_end|>\n<|im_start|>user\nMore?<|im_end|>\n")
    bridge += tokenizer.encode("<|im_start|>assistant\n")
    for index in (1, 0):  # next turns in the other order: each finds its own sequence
        follow_up = [*first[index], *turns[index].ids, *bridge]
        await backend.generate(follow_up, sampling=sampling(9, max_tokens=2))
        assert backend.last_reused == len(first[index]) + len(turns[index].ids) - 1
        assert backend.last_evaluated == len(bridge) + 1
    # a new member of the group copies the shared system prompt instead of evaluating it
    third = prompt(tokenizer, f"Describe {TOPICS[2]}.", system)
    shared_prefix = next(i for i, (a, b) in enumerate(zip(third, first[0], strict=False)) if a != b)
    assert shared_prefix > 60
    await backend.generate(third, sampling=sampling(3, max_tokens=2))
    assert backend.last_reused == shared_prefix
    # and generates what it would from a cold cache
    runtime.clear()
    shared = await backend.generate(third, sampling=sampling(3, max_tokens=8))
    assert backend.last_reused == 0
    runtime.clear()
    await backend.generate(first[0], sampling=sampling(0, max_tokens=1))
    copied = await backend.generate(third, sampling=sampling(3, max_tokens=8))
    assert backend.last_reused == shared_prefix
    assert copied.ids == shared.ids
    assert copied.logprobs == shared.logprobs


@pytest.mark.anyio
async def test_cancelling_one_rollout_frees_its_sequence_and_leaves_the_others_intact(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    prompts = [prompt(tokenizer, f"Write a long essay about {topic}.") for topic in TOPICS]
    runtime.clear()
    backend = EmbeddedTokenBackend(runtime)
    kept: dict[int, Generation] = {}

    async def survivor(index: int) -> None:
        kept[index] = await backend.generate(prompts[index], sampling=sampling(index, 24))

    async def cancelled(index: int) -> None:
        with anyio.move_on_after(1.0):
            await backend.generate(prompts[index], sampling=sampling(index, 1000))

    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            group.start_soon(cancelled, 0)
            group.start_soon(cancelled, 1)
            group.start_soon(survivor, 2)
            group.start_soon(survivor, 3)
        # all four sequences are free again: four new requests run at once
        again = await generate_all(backend, prompts[:4], max_tokens=2)
    assert all(len(g.ids) == 2 for g in again)
    runtime.clear()
    solo_backend = EmbeddedTokenBackend(runtime, deterministic=True)
    for index in (2, 3):
        solo = await solo_backend.generate(prompts[index], sampling=sampling(index, 24))
        assert solo.ids == kept[index].ids


@pytest.mark.anyio
async def test_a_group_arriving_together_evaluates_its_shared_prefix_once(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    system = "You are a careful assistant who answers in one sentence. " * 8
    prompts = [prompt(tokenizer, f"Describe {topic}.", system) for topic in TOPICS]
    shared = [
        next(i for i, (a, b) in enumerate(zip(p, prompts[0], strict=False)) if a != b)
        for p in prompts[1:]
    ]
    assert min(shared) > 60
    runtime.clear()
    backend = EmbeddedTokenBackend(runtime)
    together = await generate_all(backend, prompts, max_tokens=4)
    generated = sum(len(g.ids) for g in together)
    evaluated = backend.scheduler.step_tokens - generated + len(together)  # prompt ids only
    # the first evaluated the system prompt; the others waited for it and shared its cells
    assert evaluated == sum(len(p) for p in prompts) - sum(shared)
    runtime.clear()
    solo_backend = EmbeddedTokenBackend(runtime, deterministic=True)
    for index, ids in enumerate(prompts):
        runtime.clear()
        solo = await solo_backend.generate(ids, sampling=sampling(index, 4))
        assert solo.ids == together[index].ids
        assert solo.logprobs == together[index].logprobs


def test_a_sequence_extended_after_another_was_cut_back_computes_what_a_fresh_one_does(
    runtime: LlamaRuntime, tokenizer: GGUFTokenizer
) -> None:
    """Cells freed by one sequence are reused by the next ids of another. With a unified KV
    cache those ids landed below the sequence's older cells, attention visited them out of
    position order and the logits moved; with one KV stream per sequence they do not."""
    first = prompt(tokenizer, "Write about cats. " * 20)
    second = prompt(tokenizer, "Write about the sea. " * 20)
    more = tokenizer.encode("The sea is wide and deep, and the waves roll on the shore. " * 3)
    runtime.clear()
    runtime.feed(first, seq=0)
    runtime.feed(second, seq=1)
    runtime.truncate(8, seq=0)
    reused = runtime.feed(more, rows_from=0, seq=1)
    with LlamaRuntime(default_model_path(), n_ctx=1024, n_seq=1, n_threads=2) as fresh:
        fresh.feed(second)
        alone = fresh.feed(more, rows_from=0)
    assert np.array_equal(reused, alone)
