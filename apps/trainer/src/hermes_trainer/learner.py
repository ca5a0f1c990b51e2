"""The local learner: frozen base weights, trainable LoRA pairs, Adam, one update per batch.

:meth:`LoraLearner.update` runs the forward and backward pass of every group (one packed row
each, :mod:`hermes_trainer.packing`, scored at the group's sampling temperature, padded to a
multiple of :data:`PAD_TO` tokens so only a few shapes are compiled), averages the gradient
over the batch's trainable tokens, clips its global norm and takes one Adam step. The logprobs
of that same forward pass are the trainer's side of the importance ratio, measured before the
update. Blocking and CPU-heavy: call it off the event loop.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
from hermes_protocols import ConfigError

from hermes_trainer.checkpoint import LearnerState
from hermes_trainer.gguf_weights import BaseWeights, FloatArray
from hermes_trainer.grpo import Objective, TrainGroup
from hermes_trainer.lora import LoraArrays, LoraSpec, initial_lora
from hermes_trainer.objective import sequence_loss
from hermes_trainer.packing import pack
from hermes_trainer.samples import FidelityError

#: sequences are padded to a multiple of this many tokens (one compiled shape per multiple)
PAD_TO = 256


@attrs.frozen(kw_only=True)
class UpdateStats:
    """What one update measured: the loss (per trainable token; ``None``: the learner did not
    report it), the trainer/sampler log ratio on the trainable tokens before the update, the
    tokens and the seconds it took."""

    loss: float | None
    log_ratio_mean: float
    log_ratio_max: float
    trainable_tokens: int
    tokens: int
    seconds: float


@attrs.frozen(kw_only=True)
class OptimizerSpec:
    """Adam's learning rate, the gradient's global-norm clip and the ratio clip ``eps``."""

    learning_rate: float = 5e-4
    max_grad_norm: float = 1.0
    clip_eps: float = 0.2


class LoraLearner:
    """LoRA on a frozen GGUF base model, trained with ``objective``, from ``start`` (a LoRA
    adapter's pairs) or new pairs; see the module doc. ``remat=False`` keeps every layer's
    activations for the backward pass (:func:`~hermes_trainer.llama.token_logprobs`)."""

    def __init__(
        self,
        base: BaseWeights,
        lora: LoraSpec,
        optimizer: OptimizerSpec,
        *,
        objective: Objective = "grpo",
        seed: int = 0,
        start: LoraArrays | None = None,
        remat: bool = True,
    ) -> None:
        self.spec = lora
        self._params = {
            "embed": jnp.asarray(base.embed),
            "out_norm": jnp.asarray(base.out_norm),
            "lm_head": jnp.asarray(base.lm_head),
            **{kind: jnp.asarray(value) for kind, value in base.layers.items()},
        }
        self._lora = {
            kind: (jnp.asarray(a), jnp.asarray(b))
            for kind, (a, b) in initial_lora(base, lora, seed).items()
        }
        if start is not None:  # --init-adapter
            self._check_lora(start, "--init-adapter: the adapter's")
            self._lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in start.items()}
        self._optimizer = optax.chain(
            optax.clip_by_global_norm(optimizer.max_grad_norm),
            optax.adam(optimizer.learning_rate),
        )
        self._state = self._optimizer.init(self._lora)
        loss = functools.partial(
            sequence_loss,
            config=base.config,
            scale=lora.scale,
            clip_eps=optimizer.clip_eps,
            objective=objective,
            remat=remat,
        )
        self._grad = jax.jit(jax.value_and_grad(loss, has_aux=True))
        self.steps = 0

    def update(self, groups: Sequence[TrainGroup]) -> UpdateStats:
        """One optimizer step on ``groups`` (sequences sharing a prompt; at least one trainable
        token in all); returns what it measured before changing the weights."""
        started = time.perf_counter()
        sequences = [s for group in groups for s in group.sequences]
        trainable = sum(s.trainable for s in sequences)
        if trainable == 0:
            raise ValueError("an update needs at least one trainable token")
        vocab = int(self._params["embed"].shape[0])
        if any(not 0 <= i < vocab for s in sequences for i in s.ids):
            raise FidelityError(f"a token id is outside the model's vocabulary [0, {vocab})")
        total = jax.tree.map(jnp.zeros_like, self._lora)
        loss_sum = 0.0
        ratios: list[FloatArray] = []
        for group in groups:
            row = pack(group.sequences, pad_to=PAD_TO)
            batch = {name: jnp.asarray(values) for name, values in row.items()}
            batch["temperature"] = jnp.float32(group.temperature)
            (loss, logprobs), grads = self._grad(self._lora, self._params, batch)
            total = jax.tree.map(jnp.add, total, grads)
            loss_sum += float(loss)
            on = np.asarray(row["mask"], dtype=np.float32) > 0
            sampler = np.asarray(row["sampler_logprobs"], dtype=np.float32)
            ratios.append(np.asarray(logprobs)[on] - sampler[on])
        grads = jax.tree.map(lambda g: g / trainable, total)
        updates, self._state = self._optimizer.update(grads, self._state, self._lora)
        self._lora = optax.apply_updates(self._lora, updates)
        self.steps += 1
        log_ratio = np.abs(np.concatenate(ratios))
        return UpdateStats(
            loss=loss_sum / trainable,
            log_ratio_mean=float(log_ratio.mean()),
            log_ratio_max=float(log_ratio.max()),
            trainable_tokens=trainable,
            tokens=sum(len(s.ids) for s in sequences),
            seconds=time.perf_counter() - started,
        )

    def state(self) -> LearnerState:
        """The LoRA pairs, Adam's state and the update count (what a checkpoint holds)."""
        leaves = tuple(np.asarray(leaf) for leaf in jax.tree.leaves(self._state))
        return LearnerState(lora=self.lora_arrays(), optimizer=leaves, updates=self.steps)

    def restore(self, state: LearnerState) -> None:
        """Continue from ``state`` (:class:`ConfigError` when it was written with another
        ``--lora-rank`` or LoRA shape)."""
        self._check_lora(state.lora, "--resume: the checkpoint's")
        mine = jax.tree.leaves(self._state)
        if [np.shape(x) for x in mine] != [x.shape for x in state.optimizer]:
            raise ConfigError("--resume: the checkpoint's optimizer state differs from this run's")
        self._lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in state.lora.items()}
        self._state = jax.tree.unflatten(
            jax.tree.structure(self._state), [jnp.asarray(x) for x in state.optimizer]
        )
        self.steps = state.updates

    def _check_lora(self, lora: LoraArrays, whose: str) -> None:
        """``lora`` has this learner's projections and shapes (:class:`ConfigError` starting
        with ``whose`` when not)."""
        shapes = {k: (a.shape, b.shape) for k, (a, b) in self._lora.items()}
        theirs = {k: (a.shape, b.shape) for k, (a, b) in lora.items()}
        if theirs != shapes:
            raise ConfigError(
                f"{whose} LoRA shapes differ from this run's (another --lora-rank or model?)"
            )

    @property
    def params(self) -> Mapping[str, jax.Array]:
        """The frozen base weights, as the forward pass takes them."""
        return self._params

    def lora_arrays(self) -> Mapping[str, tuple[FloatArray, FloatArray]]:
        """The current LoRA pairs as numpy arrays (for the GGUF adapter)."""
        return {
            kind: (np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
            for kind, (a, b) in self._lora.items()
        }
