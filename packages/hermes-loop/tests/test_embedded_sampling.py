"""TokenSampler invariants: truncation, greedy, seeds, exact logprobs, empirical distribution."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hermes_loop.embedded import TokenSampler, log_softmax, token_logprob
from hermes_protocols import ConfigError, SamplingParams
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

logits_arrays = arrays(
    np.float32,
    st.integers(2, 300),
    elements=st.floats(-30, 30, width=32, allow_nan=False, allow_infinity=False),
)


def reference_logprobs(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    return x - (x.max() + math.log(np.exp(x - x.max()).sum()))


@given(logits_arrays, st.data())
def test_raw_logprob_is_log_softmax_of_the_unmodified_logits(
    logits: np.ndarray, data: st.DataObject
) -> None:
    params = SamplingParams(
        temperature=data.draw(st.floats(0.1, 3.0)),
        top_k=data.draw(st.integers(0, 50)),
        top_p=data.draw(st.floats(0.05, 1.0)),
        seed=data.draw(st.integers(0, 2**32)),
        logprob_mode="raw",
    )
    token, logprob = TokenSampler(params).sample(logits)
    assert 0 <= token < len(logits)
    assert logprob == pytest.approx(reference_logprobs(logits)[token], abs=1e-6)
    assert token_logprob(logits, token) == pytest.approx(logprob)
    np.testing.assert_allclose(log_softmax(logits), reference_logprobs(logits), atol=1e-9)


unique_logits = arrays(
    np.float32,
    st.integers(2, 300),
    elements=st.floats(-30, 30, width=32, allow_nan=False, allow_infinity=False),
    unique=True,
)


def sampled_distribution(logits: np.ndarray, params: SamplingParams) -> dict[int, float]:
    """Reference: tempered probabilities over the top-k, then the top-p nucleus, renormalized."""
    order = np.argsort(-logits.astype(np.float64), kind="stable")
    if params.top_k:
        order = order[: params.top_k]
    scaled = logits[order].astype(np.float64) / params.temperature
    weights = np.exp(scaled - scaled.max())
    cumulative = np.cumsum(weights)
    keep = int(np.searchsorted(cumulative, params.top_p * cumulative[-1], side="left")) + 1
    kept = weights[:keep]
    return {int(t): float(w / kept.sum()) for t, w in zip(order[:keep], kept, strict=True)}


@given(unique_logits, st.data())
def test_sampled_logprob_is_under_the_tempered_truncated_renormalized_distribution(
    logits: np.ndarray, data: st.DataObject
) -> None:
    params = SamplingParams(
        temperature=data.draw(st.floats(0.1, 3.0)),
        top_k=data.draw(st.integers(0, 50)),
        top_p=data.draw(st.floats(0.05, 1.0)),
        seed=data.draw(st.integers(0, 2**32)),
    )
    assert params.logprob_mode == "sampled"  # the default
    token, logprob = TokenSampler(params).sample(logits)
    distribution = sampled_distribution(logits, params)
    assert token in distribution
    assert logprob == pytest.approx(math.log(distribution[token]), abs=1e-6)


@given(logits_arrays)
def test_greedy_draws_from_a_point_mass(logits: np.ndarray) -> None:
    for params in (SamplingParams(temperature=0.0), SamplingParams(top_k=1, seed=3)):
        token, logprob = TokenSampler(params).sample(logits)
        assert logits[token] == logits.max()
        assert logprob == 0.0
    raw = TokenSampler(SamplingParams(temperature=0.0, logprob_mode="raw")).sample(logits)
    assert raw[1] == pytest.approx(reference_logprobs(logits)[raw[0]], abs=1e-6)


@given(logits_arrays, st.integers(1, 20), st.integers(0, 2**32))
def test_top_k_only_draws_from_the_k_best(logits: np.ndarray, k: int, seed: int) -> None:
    sampler = TokenSampler(SamplingParams(temperature=2.0, top_k=k, seed=seed))
    kth_best = np.sort(logits)[::-1][min(k, len(logits)) - 1]
    for _ in range(5):
        assert logits[sampler.choose(logits)] >= kth_best


@given(logits_arrays, st.floats(0.01, 0.99), st.integers(0, 2**32))
def test_top_p_only_draws_from_the_nucleus(logits: np.ndarray, top_p: float, seed: int) -> None:
    sampler = TokenSampler(SamplingParams(temperature=1.0, top_p=top_p, seed=seed))
    probs = np.exp(reference_logprobs(logits))
    for _ in range(5):
        token = sampler.choose(logits)
        # the tokens strictly more likely than the drawn one do not yet reach top_p, so the
        # drawn token belongs to the smallest set reaching it (ties may go either way)
        assert probs[probs > probs[token]].sum() < top_p + 1e-9


@given(logits_arrays, st.data())
def test_greedy_is_argmax(logits: np.ndarray, data: st.DataObject) -> None:
    params = SamplingParams(temperature=0.0, top_p=data.draw(st.floats(0.1, 1.0)))
    assert TokenSampler(params).choose(logits) == int(np.argmax(logits))
    assert TokenSampler(SamplingParams(top_k=1)).choose(logits) == int(np.argmax(logits))


@given(logits_arrays, st.integers(0, 2**32))
def test_same_seed_same_draws(logits: np.ndarray, seed: int) -> None:
    params = SamplingParams(temperature=1.3, top_p=0.9, top_k=40, seed=seed)
    a, b = TokenSampler(params), TokenSampler(params)
    assert [a.choose(logits) for _ in range(10)] == [b.choose(logits) for _ in range(10)]


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16))
def test_draws_follow_the_tempered_distribution(seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1.5, size=6).astype(np.float32)
    temperature = 0.7
    sampler = TokenSampler(SamplingParams(temperature=temperature, seed=seed))
    n = 6000
    counts = np.bincount([sampler.choose(logits) for _ in range(n)], minlength=6)
    expected = np.exp(reference_logprobs(logits / temperature)) * n
    chi2 = float((((counts - expected) ** 2) / expected).sum())
    assert chi2 < 30.0  # 5 degrees of freedom: p < 1e-5 for a correct sampler


def test_large_vocabulary_nucleus_matches_a_full_sort() -> None:
    rng = np.random.default_rng(0)
    flat = rng.normal(0, 0.05, size=49152).astype(np.float32)  # no 256 tokens reach top_p
    peaked = flat.copy()
    peaked[:10] += 12.0
    for logits in (flat, peaked):
        sampler = TokenSampler(SamplingParams(top_p=0.5, seed=1))
        probs = np.exp(reference_logprobs(logits))
        for _ in range(20):
            token = sampler.choose(logits)
            assert probs[probs > probs[token]].sum() < 0.5 + 1e-9


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=-1.0),
        SamplingParams(top_p=0.0),
        SamplingParams(top_p=1.5),
        SamplingParams(top_k=-1),
        SamplingParams(max_tokens=0),
    ],
)
def test_impossible_parameters_are_config_errors(params: SamplingParams) -> None:
    with pytest.raises(ConfigError):
        TokenSampler(params)


@given(
    st.lists(st.text(max_size=4), max_size=12),
    st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3),
)
def test_stop_strings_fire_on_the_piece_that_completes_them(
    pieces: list[str], stops: list[str]
) -> None:
    from hermes_loop.embedded.scheduler import _hit_stop

    text = bytearray()
    encoded = [s.encode("utf-8") for s in stops]
    fired = next(
        (i for i, piece in enumerate(pieces) if _hit_stop(text, piece.encode("utf-8"), encoded)),
        None,
    )
    first = next(
        (i for i in range(len(pieces)) if any(s in "".join(pieces[: i + 1]) for s in stops)),
        None,
    )
    assert fired == first


def test_the_nucleus_ranks_by_logit_where_the_probabilities_tie() -> None:
    # exp(-2.2e-30) == exp(0.0) == 1.0: only the logits say which of the two is likelier
    logits = np.array([-2.2079598e-30, 0.0], dtype=np.float32)
    params = SamplingParams(temperature=1.0, top_p=0.5, seed=0)
    for seed in range(20):
        token, logprob = TokenSampler(attrs.evolve(params, seed=seed)).sample(logits)
        assert (token, logprob) == (1, 0.0)
