"""The thread tuner: it follows measured step costs, backs off from losing probes, and the
thread count never changes what the model computes."""

from __future__ import annotations

import numpy as np
import pytest
from hermes_loop.embedded import GGUFTokenizer, LlamaRuntime, default_model_path
from hermes_loop.embedded.threads import FIRST_PROBE_GAP, MAX_PROBE_GAP, ThreadTuner


def run_steps(tuner: ThreadTuner, steps: int, cost: dict[int, float], ids: int = 8) -> list[int]:
    """Drive ``steps`` steps where a step with ``t`` threads costs ``cost[t]`` seconds per id."""
    chosen = []
    for _ in range(steps):
        threads = tuner.choose(ids)
        tuner.record(threads, cost[threads] * ids, ids)
        chosen.append(threads)
    return chosen


def test_an_idle_machine_keeps_every_core_and_probes_rarely() -> None:
    tuner = ThreadTuner(2)
    chosen = run_steps(tuner, 600, {2: 0.004, 1: 0.0066})
    assert tuner.current == 2
    # each losing probe doubles the gap: 16, 32, 64, 128, 256 steps
    assert chosen.count(1) <= 5
    assert chosen[:FIRST_PROBE_GAP] == [2] * FIRST_PROBE_GAP


def test_a_busy_machine_moves_to_one_thread_and_back_when_it_quiets() -> None:
    tuner = ThreadTuner(2)
    run_steps(tuner, 40, {2: 0.004, 1: 0.0066})
    busy = run_steps(tuner, 200, {2: 0.05, 1: 0.01})  # a preempted thread stalls each barrier
    assert tuner.current == 1
    assert busy[-100:].count(2) <= 2
    run_steps(tuner, 2 * MAX_PROBE_GAP, {2: 0.004, 1: 0.0066})
    assert tuner.current == 2


def test_probes_compare_steps_of_the_same_size() -> None:
    tuner = ThreadTuner(2)
    run_steps(tuner, FIRST_PROBE_GAP, {2: 0.007, 1: 0.012}, ids=1)  # single-sequence decodes
    # a long prompt chunk is cheaper per id than a decode, with any thread count: no probe on it
    assert tuner.choose(300) == 2
    assert tuner.choose(1) == 1


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
            rows.append(runtime.feed(ids, all_logits=True))
            rows.append(runtime.feed_one(ids[0]).copy())
    assert np.array_equal(rows[0], rows[2])
    assert np.array_equal(rows[1], rows[3])
