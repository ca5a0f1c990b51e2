"""Packed groups compute exactly what separate sequences do (a tiny random Llama in JAX)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hermes_trainer.gguf_weights import PROJECTIONS, LlamaConfig
from hermes_trainer.llama import token_logprobs
from hermes_trainer.objective import sequence_loss
from hermes_trainer.packing import TrainSequence, pack, shared_prefix
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

CONFIG = LlamaConfig(
    n_layers=2,
    d_model=16,
    d_ff=24,
    n_heads=4,
    n_kv_heads=2,
    vocab_size=40,
    rope_base=1e4,
    rms_eps=1e-5,
)


def _shapes(c: LlamaConfig) -> dict[str, tuple[int, int]]:
    hd = c.head_dim
    return {
        "attn_q": (c.n_heads * hd, c.d_model),
        "attn_k": (c.n_kv_heads * hd, c.d_model),
        "attn_v": (c.n_kv_heads * hd, c.d_model),
        "attn_output": (c.d_model, c.n_heads * hd),
        "ffn_gate": (c.d_ff, c.d_model),
        "ffn_up": (c.d_ff, c.d_model),
        "ffn_down": (c.d_model, c.d_ff),
    }


def _model(seed: int = 0) -> tuple[dict[str, jax.Array], dict[str, tuple[jax.Array, jax.Array]]]:
    rng = np.random.default_rng(seed)
    c = CONFIG
    params = {
        "embed": rng.normal(0, 1, (c.vocab_size, c.d_model)),
        "lm_head": rng.normal(0, 0.3, (c.vocab_size, c.d_model)),
        "out_norm": 1 + rng.normal(0, 0.1, c.d_model),
        "attn_norm": 1 + rng.normal(0, 0.1, (c.n_layers, c.d_model)),
        "ffn_norm": 1 + rng.normal(0, 0.1, (c.n_layers, c.d_model)),
    }
    lora = {}
    for kind, (out_dim, in_dim) in _shapes(c).items():
        params[kind] = rng.normal(0, in_dim**-0.5, (c.n_layers, out_dim, in_dim))
        lora[kind] = (
            jnp.asarray(rng.normal(0, 0.3, (c.n_layers, 2, in_dim)), jnp.float32),
            jnp.asarray(rng.normal(0, 0.3, (c.n_layers, out_dim, 2)), jnp.float32),
        )
    assert set(lora) == set(PROJECTIONS)
    return {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}, lora


def _sequence(rng: np.random.Generator, prompt: list[int], n: int, adv: float) -> TrainSequence:
    ids = tuple(prompt + [int(x) for x in rng.integers(0, CONFIG.vocab_size, n)])
    mask = (0,) * len(prompt) + (1,) * n
    logprobs = (0.0,) * len(prompt) + tuple(float(x) for x in rng.uniform(-3, -0.1, n))
    return TrainSequence(ids=ids, mask=mask, sampler_logprobs=logprobs, advantage=adv)


LOGPROBS = jax.jit(functools.partial(token_logprobs, CONFIG, 2.0, temperature=0.7))


def _alone(
    params: dict[str, jax.Array], lora: dict[str, tuple[jax.Array, jax.Array]], s: TrainSequence
) -> np.ndarray:
    n = len(s.ids) - 1
    return np.asarray(
        LOGPROBS(
            params,
            lora,
            jnp.asarray(s.ids[:-1]),
            jnp.asarray(s.ids[1:]),
            jnp.arange(n),
            jnp.zeros(n, jnp.int32),
        )
    )


def test_a_packed_group_gives_each_sequence_its_own_logprobs() -> None:
    params, lora = _model()
    rng = np.random.default_rng(1)
    prompt = [int(x) for x in rng.integers(0, CONFIG.vocab_size, 9)]
    group = [_sequence(rng, prompt, n, a) for n, a in ((3, 1.0), (7, -0.5), (1, 0.25))]
    row = pack(group, pad_to=16)
    assert len(row["ids"]) % 16 == 0
    packed = np.asarray(
        LOGPROBS(
            params,
            lora,
            *(jnp.asarray(row[k]) for k in ("ids", "targets", "positions", "segments")),
        )
    )
    prefix = shared_prefix(group)
    assert prefix == len(prompt) - 1
    offset = prefix
    for segment, sequence in enumerate(group, start=1):
        alone = _alone(params, lora, sequence)
        np.testing.assert_allclose(packed[:prefix], alone[:prefix], atol=2e-5)
        n = len(sequence.ids) - 1 - prefix
        assert (row["segments"][offset : offset + n] == segment).all()
        np.testing.assert_allclose(packed[offset : offset + n], alone[prefix:], atol=2e-5)
        offset += n


def test_the_gradient_of_a_packed_group_is_the_sum_of_its_sequences() -> None:
    params, lora = _model()
    rng = np.random.default_rng(2)
    prompt = [int(x) for x in rng.integers(0, CONFIG.vocab_size, 6)]
    group = [_sequence(rng, prompt, n, a) for n, a in ((4, 1.0), (5, -1.0))]
    loss = functools.partial(sequence_loss, config=CONFIG, scale=2.0, clip_eps=0.2)
    grad = jax.jit(jax.grad(lambda lo, batch: loss(lo, params, batch)[0]))

    def batch(rows: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        arrays = {k: jnp.asarray(v) for k, v in rows.items()}
        return {"temperature": jnp.float32(0.7), "weights": arrays["mask"], **arrays}

    together = grad(lora, batch(pack(group, pad_to=8)))
    apart = [grad(lora, batch(pack([s], pad_to=8))) for s in group]
    for kind in lora:
        for i in range(2):
            total = apart[0][kind][i] + apart[1][kind][i]
            assert float(jnp.abs(total).max()) > 1e-4  # the sequences do move the adapter
            np.testing.assert_allclose(together[kind][i], total, atol=1e-4, rtol=1e-3)


@settings(max_examples=50, deadline=None)
@given(
    prompt=st.integers(0, 6),
    rests=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=4),
)
def test_the_shared_prefix_never_holds_a_trainable_token_or_a_differing_target(
    prompt: int, rests: list[tuple[int, int]]
) -> None:
    rng = np.random.default_rng(prompt)
    head = [int(x) for x in rng.integers(0, 5, prompt + 1)]
    group = []
    for shared_context, generated in rests:
        ids = head + [7] * shared_context + [int(x) for x in rng.integers(0, 5, generated)]
        mask = [0] * (len(head) + shared_context) + [1] * generated
        group.append(
            TrainSequence(
                ids=tuple(ids), mask=tuple(mask), sampler_logprobs=(0.0,) * len(ids), advantage=1.0
            )
        )
    prefix = shared_prefix(group)
    for sequence in group:
        assert 1 not in sequence.mask[: prefix + 1]
        assert sequence.ids[: prefix + 1] == group[0].ids[: prefix + 1]
    row = pack(group, pad_to=4)
    assert row["mask"].sum() == sum(s.trainable for s in group)


def test_packing_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing to pack"):
        pack([], pad_to=8)
