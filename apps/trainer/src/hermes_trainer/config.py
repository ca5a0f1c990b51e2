"""One training run's settings (the command line maps onto :class:`TrainConfig`)."""

from __future__ import annotations

from pathlib import Path

import attrs
from hermes_envs.prefill import demonstration_path

from hermes_trainer.learner import OptimizerSpec
from hermes_trainer.lora import LoraSpec

#: a short system prompt: the model's context (and the learner's compute) goes to the task
SYSTEM_PROMPT = "Use the terminal tool to change files."


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be >= 1, got {value}")


@attrs.frozen(kw_only=True)
class TrainConfig:
    """Steps and their size, the task family, sampling, LoRA, the optimizer, the output.

    ``group_size`` rollouts of each of ``groups_per_step`` items per step; ``temperature`` is
    both the sampler's and the learner's (its logprobs are the tempered distribution's).
    ``prefill_messages`` defaults to the shipped ``write_word`` demonstration. ``eval_items``
    held-out tasks (``group_size`` rollouts each) are run before and after training."""

    output: Path
    steps: int = attrs.field(default=20, validator=_positive)
    groups_per_step: int = attrs.field(default=4, validator=_positive)
    group_size: int = attrs.field(default=8, validator=_positive)
    families: tuple[str, ...] = ("write_word",)
    difficulties: tuple[int, ...] = (1,)
    temperature: float = 0.6
    max_turns: int = attrs.field(default=2, validator=_positive)
    max_tokens: int = attrs.field(default=64, validator=_positive)
    context_tokens: int = attrs.field(default=1536, validator=_positive)
    rollout_timeout_s: float = 300.0
    system_prompt: str = SYSTEM_PROMPT
    prefill_messages: str | None = attrs.field(
        factory=lambda: str(demonstration_path("write_word"))
    )
    model: str | None = None
    threads: int | None = None
    seed: int = 0
    eval_items: int = 0
    lora: LoraSpec = attrs.field(factory=LoraSpec)
    optimizer: OptimizerSpec = attrs.field(factory=OptimizerSpec)
