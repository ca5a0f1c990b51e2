"""The optimizer's settings (``--learning-rate``, its schedule, the clips, ``--loss-norm``,
``--passes``, ``--minibatches``, ``--kl-coef``), checked when built; free of JAX, so the
command line checks its options before anything heavy loads."""

from __future__ import annotations

from typing import Literal

import attrs
from hermes_protocols import ConfigError

LrSchedule = Literal["constant", "linear", "cosine"]
LR_SCHEDULES: tuple[LrSchedule, ...] = ("constant", "linear", "cosine")
#: how a batch's summed token losses are normalised (``--loss-norm``)
LossNorm = Literal["token", "sequence", "constant"]
LOSS_NORMS: tuple[LossNorm, ...] = ("token", "sequence", "constant")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@attrs.frozen(kw_only=True)
class OptimizerSpec:
    """Adam's learning rate and its schedule over the run's updates, the gradient's
    global-norm clip, the ratio clip (``1 - clip_eps`` to ``1 + clip_eps_high``; ``None``:
    ``clip_eps``), the loss normalisation, the optimizer steps per batch (``passes`` over it,
    each in ``minibatches`` of its groups) and the KL coefficient to the base model."""

    learning_rate: float = 5e-4
    max_grad_norm: float = 1.0
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    loss_norm: LossNorm = "token"
    lr_schedule: LrSchedule = "constant"
    warmup_steps: int = 0
    passes: int = 1
    minibatches: int = 1
    kl_coef: float = 0.0

    def __attrs_post_init__(self) -> None:
        _check(self.learning_rate > 0, f"--learning-rate must be > 0, got {self.learning_rate}")
        _check(0 < self.clip_eps < 1, f"--clip-eps must be in (0, 1), got {self.clip_eps}")
        _check(
            self.clip_eps_high is None or self.clip_eps_high > 0,
            f"--clip-eps-high must be > 0, got {self.clip_eps_high}",
        )
        _check(
            self.loss_norm in LOSS_NORMS,
            f"--loss-norm must be one of {', '.join(LOSS_NORMS)}, got {self.loss_norm!r}",
        )
        _check(
            self.lr_schedule in LR_SCHEDULES,
            f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}",
        )
        _check(self.warmup_steps >= 0, f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        _check(self.passes >= 1, f"--passes must be >= 1, got {self.passes}")
        _check(self.minibatches >= 1, f"--minibatches must be >= 1, got {self.minibatches}")
        _check(self.kl_coef >= 0, f"--kl-coef must be >= 0, got {self.kl_coef}")

    @property
    def eps_high(self) -> float:
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high

    def rate(self, update: int, steps: int) -> float:
        """The learning rate of the 0-based ``update`` of a run of ``steps``: ``(update + 1) /
        (warmup + 1)`` of it during the warmup, then constant, or decaying linearly or along
        a cosine over the remaining ``steps - warmup`` updates (to 0 just after the last)."""
        import optax  # type: ignore[import-untyped]  # loads JAX: not for the option checks

        lr, warmup = self.learning_rate, self.warmup_steps
        if update < warmup:
            return float(optax.linear_schedule(lr / (warmup + 1), lr, warmup)(update))
        if self.lr_schedule == "constant":
            return lr
        decay = max(steps - warmup, 1)
        if self.lr_schedule == "linear":
            return float(optax.linear_schedule(lr, 0.0, decay)(update - warmup))
        return float(optax.cosine_decay_schedule(lr, decay)(update - warmup))
