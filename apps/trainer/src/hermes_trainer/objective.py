"""The objectives on a packed row of sequences: GRPO's clipped importance-weighted policy
gradient, and supervised fine-tuning.

For each trainable token ``t`` (the model's own, ``mask = 1``) with advantage ``A``, sampler
logprob ``q_t`` and trainer logprob ``p_t``: ``ratio = exp(p_t - q_t)`` and the token's loss is
``-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)``. With one pass over a batch the
ratio differs from 1 only by the trainer/sampler mismatch, which this corrects for; from a
second pass on (``--passes``) it is off-policy and the clip bounds the step. The trainer scores
tokens with the sampler's distribution: ``log_softmax(logits / temperature)``.

``kl_coef > 0`` adds ``kl_coef * (exp(r) - r - 1)`` per trainable token, ``r = ref_t - p_t``
with ``ref_t`` the base model's logprob (the k3 estimator of KL(policy || base), as GRPO does).

``sft`` is the negative log-likelihood of the trainable tokens (``-p_t``), for rollouts kept by
their reward (rejection-sampling fine-tuning on the batch runner's trajectories).

The row's token losses are summed with the per-token ``weights`` (the mask, or the mask over
each sequence's length for ``--loss-norm sequence``: :func:`token_weights`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from hermes_trainer.gguf_weights import LlamaConfig
from hermes_trainer.grpo import Objective
from hermes_trainer.llama import Lora, Params, token_logprobs
from hermes_trainer.optimizer import LossNorm


def kl_k3(ref_logprobs: jax.Array, logprobs: jax.Array) -> jax.Array:
    """Per-token ``exp(r) - r - 1`` with ``r = ref - logprobs`` (>= 0, 0 where they agree)."""
    r = ref_logprobs - logprobs
    return jnp.exp(r) - r - 1.0


def sequence_loss(
    lora: Lora,
    params: Params,
    batch: dict[str, jax.Array],
    *,
    config: LlamaConfig,
    scale: float,
    clip_eps: float,
    clip_eps_high: float | None = None,
    kl_coef: float = 0.0,
    objective: Objective = "grpo",
    remat: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """``(weighted sum of token losses, trainer logprobs)`` of one packed, padded row.

    ``batch`` holds ``ids``, ``targets`` (each token's next one), ``positions``, ``segments``
    (:mod:`hermes_trainer.llama`), ``mask``, ``weights``, ``sampler_logprobs`` and
    ``advantages`` (and ``ref_logprobs`` when ``kl_coef > 0``), each ``(tokens,)`` and aligned
    to the targets, and the row's sampling ``temperature`` (a scalar). ``clip_eps_high``
    ``None``: ``clip_eps``. ``remat``: :func:`~hermes_trainer.llama.token_logprobs`'.
    """
    logprobs = token_logprobs(
        config,
        scale,
        params,
        lora,
        batch["ids"],
        batch["targets"],
        batch["positions"],
        batch["segments"],
        temperature=batch["temperature"],
        remat=remat,
    )
    if objective == "sft":
        per_token = -logprobs
    else:
        high = clip_eps if clip_eps_high is None else clip_eps_high
        ratio = jnp.exp(logprobs - batch["sampler_logprobs"])
        advantages = batch["advantages"]
        clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + high)
        per_token = -jnp.minimum(ratio * advantages, clipped * advantages)
    if kl_coef:
        per_token = per_token + kl_coef * kl_k3(batch["ref_logprobs"], logprobs)
    return jnp.sum(per_token * batch["weights"]), logprobs


def base_logprobs(
    lora: Lora, params: Params, batch: dict[str, jax.Array], *, config: LlamaConfig
) -> jax.Array:
    """The base model's logprobs of a row: the same forward with the LoRA delta off (``B``
    zero), as the KL term's reference."""
    off = jax.tree.map(jnp.zeros_like, lora)
    return token_logprobs(
        config,
        1.0,
        params,
        off,
        batch["ids"],
        batch["targets"],
        batch["positions"],
        batch["segments"],
        temperature=batch["temperature"],
    )


def token_weights(
    mask: npt.NDArray[np.float32], segments: npt.NDArray[np.int32], norm: LossNorm
) -> npt.NDArray[np.float32]:
    """Each token's weight in a packed row's sum: the mask itself, or for ``sequence`` the
    mask divided by its sequence's (segment's) trainable token count."""
    if norm != "sequence":
        return mask
    counts = np.zeros(int(segments.max(initial=0)) + 1, np.float32)
    on = (segments >= 0) & (mask > 0)
    np.add.at(counts, segments[on], mask[on])
    per_token = counts[np.maximum(segments, 0)]
    return np.where(mask > 0, mask / np.maximum(per_token, 1.0), 0.0).astype(np.float32)


def normaliser(norm: LossNorm, *, trainable: int, sequences: int, budget_tokens: int) -> float:
    """What the weighted sum of a batch's token losses is divided by: its trainable tokens
    (``token``), its sequences (``sequence``: each already a per-token mean) or
    ``sequences * budget_tokens`` (``constant``: the most tokens they could have sampled)."""
    if norm == "token":
        return float(trainable)
    if norm == "sequence":
        return float(sequences)
    return float(sequences * budget_tokens)


def clip_fraction(
    logprobs: npt.NDArray[np.float32],
    row: dict[str, npt.NDArray[np.generic]],
    *,
    clip_eps: float,
    clip_eps_high: float,
) -> tuple[int, int]:
    """``(clipped, trainable)`` tokens of a row: those whose ratio is past the clip on the
    side the advantage pushes it (their gradient is zero)."""
    on = np.asarray(row["mask"]) > 0
    ratio = np.exp(logprobs[on] - np.asarray(row["sampler_logprobs"], np.float32)[on])
    advantages = np.asarray(row["advantages"], np.float32)[on]
    high = (ratio > 1.0 + clip_eps_high) & (advantages > 0)
    low = (ratio < 1.0 - clip_eps) & (advantages < 0)
    return int(np.sum(high | low)), int(np.sum(on))
