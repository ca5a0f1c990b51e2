"""The thread tuner: it follows measured step costs, backs off from losing probes, and the
thread count never changes what the model computes."""

from __future__ import annotations

import numpy as np
import pytest
from hermes_loop.embedded import (
    EmbeddedTokenBackend,
    GGUFTokenizer,
    LlamaRuntime,
    default_model_path,
)
from hermes_loop.embedded.runtime import STEP_IDS
from hermes_loop.embedded.threads import FIRST_PROBE_GAP, MAX_PROBE_GAP, ThreadTuner
from hermes_protocols import SamplingParams

pytestmark = pytest.mark.slow


def run_steps(tuner: ThreadTuner, steps: int, cost: dict[int, float], ids: int = 8) -> list[int]:
    """Drive ``steps`` steps where a step with ``t`` threads costs ``cost[t]`` seconds per id."""
    chosen = []
    for _ in range(steps):
        threads = tuner.choose(ids)
        tuner.record(threads, cost[threads] * ids, ids)
        chosen.append(threads)
    return chosen


def test_an_idle_machine_moves_to_every_core_and_probes_rarely() -> None:
    tuner = ThreadTuner(2)
    chosen = run_steps(tuner, 1000, {2: 0.004, 1: 0.0066})
    assert tuner.current == 2
    assert chosen[: FIRST_PROBE_GAP + 1] == [1] * FIRST_PROBE_GAP + [2]  # first probe wins
    # then each losing probe of one thread doubles the gap: 2, 4, 8, ..., 512 steps
    assert chosen[FIRST_PROBE_GAP + 1 :].count(1) <= 9


def test_a_busy_machine_moves_to_one_thread_and_back_when_it_quiets() -> None:
    tuner = ThreadTuner(2)
    run_steps(tuner, 40, {2: 0.004, 1: 0.0066})
    assert tuner.current == 2
    busy = run_steps(tuner, 2000, {2: 0.05, 1: 0.01})  # a preempted thread stalls each barrier
    assert tuner.current == 1
    # ten times slower: after a losing probe the next waits MAX_PROBE_GAP steps
    assert busy[-1500:].count(2) <= 2
    run_steps(tuner, 2 * MAX_PROBE_GAP, {2: 0.004, 1: 0.0066})
    assert tuner.current == 2


def test_a_busy_machine_from_the_start_pays_for_one_probe() -> None:
    tuner = ThreadTuner(2)
    chosen = run_steps(tuner, MAX_PROBE_GAP, {2: 0.05, 1: 0.01})
    assert chosen.count(2) == 1


def test_probes_compare_steps_of_the_same_size() -> None:
    tuner = ThreadTuner(2)
    run_steps(tuner, FIRST_PROBE_GAP, {2: 0.007, 1: 0.012}, ids=1)  # single-sequence decodes
    # a prompt chunk is cheaper per id than a decode, with any thread count: no probe on it
    assert tuner.choose(60) == 1
    assert tuner.choose(1) == 2


def test_one_core_leaves_nothing_to_tune() -> None:
    tuner = ThreadTuner(1)
    assert run_steps(tuner, 100, {1: 0.01}) == [1] * 100
    with pytest.raises(ValueError, match="at least 1"):
        ThreadTuner(0)


def test_the_thread_count_does_not_change_the_logits() -> None:
    tokenizer = GGUFTokenizer.from_gguf(default_model_path())
    ids = tokenizer.encode("The thread count must not move a single logit. " * 12)
    rows = []
    with LlamaRuntime(default_model_path(), n_ctx=512, n_seq=1, n_threads=2) as runtime:
        for threads in (2, 1):
            runtime.clear()
            runtime.set_threads(threads)
            rows.append(runtime.feed(ids, rows_from=0))
            rows.append(runtime.feed_one(ids[0]).copy())
    assert np.array_equal(rows[0], rows[2])
    assert np.array_equal(rows[1], rows[3])


@pytest.mark.anyio
async def test_a_backend_without_a_thread_count_tunes_it_and_computes_the_same() -> None:
    """Generation steps and scoring chunks alike go through the tuner, in steps of at most
    ``STEP_IDS`` ids (on a machine kept busy by two other processes, scoring four rollouts
    took 106-218 s on two threads, 46-56 s tuned), and the thread count moves neither."""
    tokenizer = GGUFTokenizer.from_gguf(default_model_path())
    ids = tokenizer.encode(
        "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"
    )
    params = SamplingParams(temperature=1.0, max_tokens=24, seed=7)
    async with await EmbeddedTokenBackend.open(n_ctx=256, n_threads=1) as fixed:
        assert fixed.runtime.tuner is None
        reference = await fixed.generate(ids, sampling=params)
        reference_scores = await fixed.score([*ids, *reference.ids], start=len(ids))
    async with await EmbeddedTokenBackend.open(n_ctx=256) as tuned:
        tuner = tuned.runtime.tuner
        assert tuner is not None
        generation = await tuned.generate(ids, sampling=params)
        assert sum(tuner.steps.values()) == len(generation.ids)  # prompt step + decode steps
        scored = [*ids, *generation.ids]
        scores = await tuned.score(scored, start=len(ids))
        chunks = -(-len(scored) // STEP_IDS)
        assert sum(tuner.steps.values()) == len(generation.ids) + chunks
    assert generation.ids == reference.ids
    assert generation.logprobs == reference.logprobs
    assert scores == reference_scores
