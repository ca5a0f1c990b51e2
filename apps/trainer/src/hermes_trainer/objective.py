"""The objectives on a packed row of sequences: GRPO's clipped importance-weighted policy
gradient, and supervised fine-tuning.

For each trainable token ``t`` (the model's own, ``mask = 1``) with advantage ``A``, sampler
logprob ``q_t`` and trainer logprob ``p_t``: ``ratio = exp(p_t - q_t)`` and the token's loss is
``-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``. With one update per batch the ratio
differs from 1 only by the trainer/sampler mismatch, which this corrects for. The trainer
scores tokens with the sampler's distribution: ``log_softmax(logits / temperature)``.

``sft`` is the negative log-likelihood of the trainable tokens (``-p_t``), for rollouts kept by
their reward (rejection-sampling fine-tuning on the batch runner's trajectories).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hermes_trainer.gguf_weights import LlamaConfig
from hermes_trainer.grpo import Objective
from hermes_trainer.llama import Lora, Params, token_logprobs


def sequence_loss(
    lora: Lora,
    params: Params,
    batch: dict[str, jax.Array],
    *,
    config: LlamaConfig,
    scale: float,
    clip_eps: float,
    objective: Objective = "grpo",
    remat: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """``(sum of token losses, trainer logprobs)`` of one packed, padded row.

    ``batch`` holds ``ids``, ``targets`` (each token's next one), ``positions``, ``segments``
    (:mod:`hermes_trainer.llama`), ``mask``, ``sampler_logprobs`` and ``advantages``, each
    ``(tokens,)`` and aligned to the targets, and the row's sampling ``temperature`` (a
    scalar). ``remat``: :func:`~hermes_trainer.llama.token_logprobs`'.
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
        return -jnp.sum(logprobs * batch["mask"]), logprobs
    ratio = jnp.exp(logprobs - batch["sampler_logprobs"])
    advantages = batch["advantages"]
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    per_token = -jnp.minimum(ratio * advantages, clipped * advantages)
    return jnp.sum(per_token * batch["mask"]), logprobs
