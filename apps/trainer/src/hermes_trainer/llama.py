"""The Llama forward pass in JAX, with LoRA on every projection, as llama.cpp computes it.

RMSNorm, llama.cpp's pairwise RoPE (the GGUF's query/key rows are permuted for it), grouped
query attention (query head ``h`` reads key/value head ``h // (n_heads / n_kv_heads)``),
SwiGLU, and the output projection (tied to the embeddings for SmolLM2). The layers run in one
``lax.scan`` so compiling does not grow with depth, each under ``jax.checkpoint``. A LoRA pair
``(A, B)`` adds ``scale * B @ A`` to its matrix, ``scale = alpha / rank`` as llama.cpp applies
it.

Several sequences that share a prefix run packed in one row: the prefix once (segment 0),
then each sequence's own tokens (segments 1, 2, ...) with positions continuing the prefix's. A
token attends to earlier positions of the prefix and of its own segment only, so each
sequence's logprobs (and gradients) are those of running it alone.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from hermes_trainer.gguf_weights import PROJECTIONS, LlamaConfig

Params = Mapping[str, jax.Array]
"""Base weights by name: ``embed``, ``out_norm``, ``lm_head`` and one stacked array per layer
tensor kind (``attn_q``, ..., ``attn_norm``, ``ffn_norm``)."""
Lora = Mapping[str, tuple[jax.Array, jax.Array]]
"""Per projection kind: ``A`` stacked ``(layers, rank, in)`` and ``B`` ``(layers, out, rank)``."""


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: jax.Array, positions: jax.Array, base: float) -> jax.Array:
    """Rotate each adjacent pair ``(x[2i], x[2i+1])`` of every head (llama.cpp's normal
    RoPE); ``x`` is ``(tokens, heads, head_dim)``."""
    head_dim = x.shape[-1]
    inv_freq = base ** (-jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
    angles = positions[:, None].astype(jnp.float32) * inv_freq[None, :]
    cos, sin = jnp.cos(angles)[:, None, :], jnp.sin(angles)[:, None, :]
    pairs = x.reshape(*x.shape[:-1], head_dim // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(x.shape)


def _project(
    x: jax.Array, weight: jax.Array, lora: tuple[jax.Array, jax.Array] | None, scale: float
) -> jax.Array:
    out = x @ weight.T
    if lora is not None:
        a, b = lora
        out = out + scale * ((x @ a.T) @ b.T)
    return out


def attention_mask(positions: jax.Array, segments: jax.Array) -> jax.Array:
    """``mask[q, k]``: key ``k`` is at or before query ``q`` and in the prefix (segment 0) or
    in the query's own segment."""
    earlier = positions[None, :] <= positions[:, None]
    same = (segments[None, :] == 0) | (segments[None, :] == segments[:, None])
    return earlier & same


def _layer(
    config: LlamaConfig,
    scale: float,
    h: jax.Array,
    positions: jax.Array,
    allowed: jax.Array,
    weights: Params,
    lora: Lora,
) -> jax.Array:
    tokens = h.shape[0]
    hd = config.head_dim

    def proj(x: jax.Array, kind: str) -> jax.Array:
        return _project(x, weights[kind], lora.get(kind), scale)

    x = rms_norm(h, weights["attn_norm"], config.rms_eps)
    q = rope(proj(x, "attn_q").reshape(tokens, config.n_heads, hd), positions, config.rope_base)
    k = rope(proj(x, "attn_k").reshape(tokens, config.n_kv_heads, hd), positions, config.rope_base)
    v = proj(x, "attn_v").reshape(tokens, config.n_kv_heads, hd)
    group = config.n_heads // config.n_kv_heads
    k = jnp.repeat(k, group, axis=1)
    v = jnp.repeat(v, group, axis=1)
    scores = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(jnp.float32(hd))
    scores = jnp.where(allowed[None], scores, -jnp.inf)
    attention = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)
    h = h + proj(attention.reshape(tokens, config.d_model), "attn_output")
    x = rms_norm(h, weights["ffn_norm"], config.rms_eps)
    gated = jax.nn.silu(proj(x, "ffn_gate")) * proj(x, "ffn_up")
    return h + proj(gated, "ffn_down")


def token_logprobs(
    config: LlamaConfig,
    scale: float,
    params: Params,
    lora: Lora,
    ids: jax.Array,
    targets: jax.Array,
    positions: jax.Array,
    segments: jax.Array,
    *,
    temperature: float | jax.Array = 1.0,
    remat: bool = True,
) -> jax.Array:
    """``log p(targets[t] | what token t sees)`` for every position of a packed row (all four
    arrays ``(tokens,)``; see the module doc; padding after the real tokens changes nothing),
    from ``log_softmax(logits / temperature)``: the distribution a sampler at that temperature
    draws from. One plain sequence: ``positions = arange``, ``segments = 0``. With ``remat``
    the backward pass recomputes each layer's activations instead of keeping all of them
    (the attention weights alone are ``heads x tokens^2`` floats per layer): measured on 4 rows
    of 1,536 tokens, peak RSS 3.1 GiB instead of 10.6 GiB, the same loss, the update up to 1.4x
    slower (``benchmarks/bench_trainer_memory.py``; ``--keep-activations`` turns it off)."""
    layer_weights = {kind: params[kind] for kind in (*PROJECTIONS, "attn_norm", "ffn_norm")}

    allowed = attention_mask(positions, segments)

    def step(h: jax.Array, layer: tuple[Params, Lora]) -> tuple[jax.Array, None]:
        weights, adapters = layer
        return _layer(config, scale, h, positions, allowed, weights, adapters), None

    h = params["embed"][ids]
    h, _ = jax.lax.scan(jax.checkpoint(step) if remat else step, h, (layer_weights, dict(lora)))
    h = rms_norm(h, params["out_norm"], config.rms_eps)
    logits = h @ params["lm_head"].T
    logprobs = jax.nn.log_softmax(logits / temperature, axis=-1)
    return jnp.take_along_axis(logprobs, targets[:, None], axis=-1)[:, 0]
