"""The local learner: frozen base weights, trainable LoRA pairs, Adam.

:meth:`LoraLearner.update` runs the forward and backward pass of every group (one packed row
each, :mod:`hermes_trainer.packing`, scored at the group's sampling temperature, padded to a
multiple of :data:`PAD_TO` tokens so only a few shapes are compiled), normalises the summed
gradient (``--loss-norm``: by default over the batch's trainable tokens), clips its global norm
and takes an Adam step at the step's scheduled learning rate. By default that is one step per
batch; ``passes`` and ``minibatches`` make it ``passes * minibatches`` steps, each minibatch a
share of the groups. The logprobs of the first pass's forward are the trainer's side of the
logged importance ratio (with one minibatch: before any update). Blocking and CPU-heavy: call
it off the event loop.
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
from hermes_trainer.objective import (
    base_logprobs,
    clip_fraction,
    kl_k3,
    normaliser,
    sequence_loss,
    token_weights,
)
from hermes_trainer.optimizer import OptimizerSpec
from hermes_trainer.packing import Row, pack
from hermes_trainer.samples import FidelityError

#: sequences are padded to a multiple of this many tokens (one compiled shape per multiple)
PAD_TO = 256


@attrs.frozen(kw_only=True)
class UpdateStats:
    """What one update measured: the loss (per the ``--loss-norm`` normaliser, over the first
    pass; ``None``: the learner did not report it), the trainer/sampler log ratio on the
    trainable tokens in the first pass's forward, the tokens and the seconds it took, the
    learning rate, the share of trainable tokens the last pass clipped and the mean k3 KL to
    the base model in the first pass (``None``: not measured)."""

    loss: float | None
    log_ratio_mean: float
    log_ratio_max: float
    trainable_tokens: int
    tokens: int
    seconds: float
    learning_rate: float | None = None
    clip_fraction: float | None = None
    kl: float | None = None


class LoraLearner:
    """LoRA on a frozen GGUF base model, trained with ``objective``, from ``start`` (a LoRA
    adapter's pairs) or new pairs; see the module doc. ``steps``: the run's length (the
    learning-rate schedule's); ``budget_tokens``: the most tokens a sequence may sample
    (``--loss-norm constant``'s per-sequence constant). ``remat=False`` keeps every layer's
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
        steps: int = 1,
        budget_tokens: int = 1,
    ) -> None:
        self.spec = lora
        self.optimizer = optimizer
        self._steps = steps
        self._budget_tokens = budget_tokens
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
        # Adam's direction; the (scheduled) learning rate scales it in :meth:`_step`
        self._optimizer = optax.chain(
            optax.clip_by_global_norm(optimizer.max_grad_norm), optax.scale_by_adam()
        )
        self._state = self._optimizer.init(self._lora)
        loss = functools.partial(
            sequence_loss,
            config=base.config,
            scale=lora.scale,
            clip_eps=optimizer.clip_eps,
            clip_eps_high=optimizer.clip_eps_high,
            kl_coef=optimizer.kl_coef,
            objective=objective,
            remat=remat,
        )
        self._grad = jax.jit(jax.value_and_grad(loss, has_aux=True))
        self._base_logprobs = jax.jit(functools.partial(base_logprobs, config=base.config))
        self.steps = 0

    def update(self, groups: Sequence[TrainGroup]) -> UpdateStats:
        """``passes`` times ``minibatches`` optimizer steps on ``groups`` (sequences sharing a
        prompt; at least one trainable token in all); returns what it measured."""
        started = time.perf_counter()
        spec = self.optimizer
        sequences = [s for group in groups for s in group.sequences]
        trainable = sum(s.trainable for s in sequences)
        if trainable == 0:
            raise ValueError("an update needs at least one trainable token")
        vocab = int(self._params["embed"].shape[0])
        if any(not 0 <= i < vocab for s in sequences for i in s.ids):
            raise FidelityError(f"a token id is outside the model's vocabulary [0, {vocab})")
        rows = [pack(group.sequences, pad_to=PAD_TO) for group in groups]
        batches = [
            self._batch(row, group.temperature) for row, group in zip(rows, groups, strict=True)
        ]
        learning_rate = spec.rate(self.steps, self._steps)
        parts = [p for p in np.array_split(np.arange(len(groups)), spec.minibatches) if p.size]
        losses: list[float] = []
        ratios: list[FloatArray] = []
        kls: list[FloatArray] = []
        clipped = counted = 0
        for pass_ in range(spec.passes):
            for part in parts:
                total = jax.tree.map(jnp.zeros_like, self._lora)
                loss_sum = 0.0
                for i in part:
                    (loss, logprobs), grads = self._grad(self._lora, self._params, batches[i])
                    total = jax.tree.map(jnp.add, total, grads)
                    loss_sum += float(loss)
                    on = np.asarray(rows[i]["mask"], dtype=np.float32) > 0
                    mine = np.asarray(logprobs)
                    if pass_ == 0:
                        sampler = np.asarray(rows[i]["sampler_logprobs"], dtype=np.float32)
                        ratios.append(mine[on] - sampler[on])
                        if spec.kl_coef:
                            ref = np.asarray(batches[i]["ref_logprobs"])
                            kls.append(
                                np.asarray(kl_k3(jnp.asarray(ref[on]), jnp.asarray(mine[on])))
                            )
                    if pass_ == spec.passes - 1:
                        c, n = clip_fraction(
                            mine, rows[i], clip_eps=spec.clip_eps, clip_eps_high=spec.eps_high
                        )
                        clipped, counted = clipped + c, counted + n
                chosen = [s for i in part for s in groups[i].sequences]
                norm = normaliser(
                    spec.loss_norm,
                    trainable=sum(s.trainable for s in chosen),
                    sequences=len(chosen),
                    budget_tokens=self._budget_tokens,
                )
                if norm == 0:  # a minibatch without trainable tokens
                    continue
                self._step(jax.tree.map(lambda g, n=norm: g / n, total), learning_rate)
                if pass_ == 0:
                    losses.append(loss_sum / norm)
        self.steps += 1
        log_ratio = np.abs(np.concatenate(ratios))
        return UpdateStats(
            loss=sum(losses) / len(losses),
            log_ratio_mean=float(log_ratio.mean()),
            log_ratio_max=float(log_ratio.max()),
            trainable_tokens=trainable,
            tokens=sum(len(s.ids) for s in sequences),
            seconds=time.perf_counter() - started,
            learning_rate=learning_rate,
            clip_fraction=clipped / counted if counted else None,
            kl=float(np.concatenate(kls).mean()) if kls else None,
        )

    def _batch(self, row: Row, temperature: float) -> dict[str, jax.Array]:
        """A packed row as the loss takes it: its arrays, the token weights of
        ``--loss-norm``, the temperature, and the base model's logprobs when the KL term
        needs them."""
        batch = {name: jnp.asarray(values) for name, values in row.items()}
        mask = np.asarray(row["mask"], np.float32)
        segments = np.asarray(row["segments"], np.int32)
        batch["weights"] = jnp.asarray(token_weights(mask, segments, self.optimizer.loss_norm))
        batch["temperature"] = jnp.float32(temperature)
        if self.optimizer.kl_coef:
            batch["ref_logprobs"] = self._base_logprobs(self._lora, self._params, batch)
        return batch

    def _step(self, grads: Mapping[str, tuple[jax.Array, jax.Array]], rate: float) -> None:
        """One Adam step of ``rate`` on the normalised gradient."""
        direction, self._state = self._optimizer.update(grads, self._state, self._lora)
        updates, _ = optax.scale_by_learning_rate(rate).update(direction, optax.EmptyState())
        self._lora = optax.apply_updates(self._lora, updates)

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
