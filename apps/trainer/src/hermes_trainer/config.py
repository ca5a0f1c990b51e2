"""One training run's settings (the command line maps onto :class:`TrainConfig`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from hermes_protocols import ConfigError
from hermes_rollouts import (
    BackendKind,
    demonstration_path,
)
from hermes_rollouts import option_defaults as defaults

from hermes_trainer.grpo import Objective
from hermes_trainer.loggers import check_log_to
from hermes_trainer.lora import LoraSpec
from hermes_trainer.optimizer import OptimizerSpec
from hermes_trainer.tinker_spec import TinkerSpec

ENDLESS = "endless_terminals"
#: the sandbox backends of the live source: those that need no credentials or servers of
#: their own (the batch runner takes every backend)
SANDBOXES: tuple[BackendKind, ...] = ("bwrap", "docker", "ray")
#: a short system prompt: the model's context (and the learner's compute) goes to the task
SYSTEM_PROMPT = "Use the terminal tool to change files."
#: the sampling and budgets docs/training.md's measured curve used (``TrainConfig`` fields;
#: the defaults are the ones every app shares)
MEASURED_RECIPE: Mapping[str, float] = {
    "temperature": 0.6,
    "max_turns": 2,
    "max_tokens": 64,
    "context_tokens": 1536,
}


def _option(field: str) -> str:
    """The command-line option of a field (``eval_items`` -> ``--eval-items``)."""
    return f"--{field.replace('_', '-')}"


def recipe_options() -> str:
    """:data:`MEASURED_RECIPE` as command-line options."""
    return " ".join(f"{_option(k)} {v:g}" for k, v in MEASURED_RECIPE.items())


def _at_least(low: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
        if value < low:
            raise ConfigError(f"{_option(attribute.name)} must be >= {low}, got {value}")

    return check


_positive = _at_least(1)


@attrs.frozen(kw_only=True)
class TrainConfig:
    """Where rollouts come from, steps and their size, the task family, sampling, LoRA, the
    optimizer, the output.

    The source: the embedded model in this process (default), an Atropos ``run-api`` at
    ``atropos_url`` (the environment reloads ``adapter``), or batch runner ``trajectories``
    (``epochs`` passes). ``group_size`` rollouts of each of ``groups_per_step`` items per step
    (with Atropos: ``groups_per_step * group_size`` sequences per batch); ``temperature`` is
    the live sampler's (the learner scores each group at the temperature its rollouts record).
    ``env`` is the environment reference (a shipped or installed name, ``package.module:NAME``
    or ``path/to/file.py:NAME``) and ``env_options`` its options; ``families`` and
    ``difficulties`` are ``endless_terminals``' (ignored for any other environment).
    ``prefill_messages`` defaults to the shipped ``write_word`` demonstration. ``eval_items``
    held-out tasks (``group_size`` rollouts each) are run before and after training and every
    ``eval_every`` steps (live source only); ``steps`` 0 only evaluates the starting weights.
    ``objective`` ``sft`` trains on rollouts with ``reward >= min_reward``; ``grpo`` with the
    live source needs groups of 2 or more.
    ``tinker``: sample and train through the Tinker API instead of the embedded model and the
    local learner (live source, temperature 1). The local learner writes a checkpoint every
    ``checkpoint_every`` steps; ``resume`` continues the run in ``output`` from it (the same
    options; ``steps`` may grow). ``init_adapter``: the local learner starts from this LoRA
    adapter GGUF instead of a new one. ``sandbox`` (one of :data:`SANDBOXES`), ``sandbox_image``
    (docker), ``ray_address`` and ``ray_python`` (ray) choose the live source's sandboxes.
    ``log_to`` sends the metrics to TensorBoard and/or wandb too (:mod:`hermes_trainer.loggers`;
    ``wandb_project``: the wandb run's). ``keep_activations``: the local learner keeps every
    layer's activations for the backward pass instead of recomputing them (more memory).
    ``overlap``: the live source samples step N+1 with the weights before step N's update while
    that update runs (policy lag 1). Every error is a ``ConfigError`` naming the command-line
    option."""

    output: Path
    steps: int = attrs.field(default=20, validator=_at_least(0))
    groups_per_step: int = attrs.field(default=4, validator=_positive)
    group_size: int = attrs.field(default=8, validator=_positive)
    env: str = defaults.ENVIRONMENT.value
    env_options: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    families: tuple[str, ...] = ("write_word",)
    difficulties: tuple[int, ...] = (1,)
    temperature: float = defaults.TEMPERATURE.value
    max_turns: int = attrs.field(default=defaults.MAX_TURNS.value, validator=_positive)
    max_tokens: int = attrs.field(default=defaults.MAX_TOKENS.value, validator=_positive)
    context_tokens: int = attrs.field(default=defaults.CONTEXT_TOKENS.value, validator=_positive)
    rollout_timeout_s: float = defaults.ROLLOUT_TIMEOUT.value
    system_prompt: str = SYSTEM_PROMPT
    prefill_messages: str | None = attrs.field(
        factory=lambda: str(demonstration_path("write_word"))
    )
    model: str | None = None
    threads: int | None = None
    seed: int = defaults.SEED.value
    eval_items: int = attrs.field(default=0, validator=_at_least(0))
    eval_every: int = attrs.field(default=0, validator=_at_least(0))
    lora: LoraSpec = attrs.field(factory=LoraSpec)
    optimizer: OptimizerSpec = attrs.field(factory=OptimizerSpec)
    objective: Objective = "grpo"
    min_reward: float = 1.0
    atropos_url: str | None = None
    atropos_timeout_s: float = 1800.0
    trajectories: tuple[Path, ...] = ()
    epochs: int = attrs.field(default=1, validator=_positive)
    adapter: Path | None = None
    init_adapter: Path | None = None
    tinker: TinkerSpec | None = None
    checkpoint_every: int = attrs.field(default=1, validator=_positive)
    resume: bool = False
    sandbox: BackendKind = defaults.SANDBOX.value
    sandbox_image: str | None = None
    ray_address: str | None = None
    ray_python: str | None = None
    log_to: tuple[str, ...] = ()
    wandb_project: str = "hermes-rl"
    keep_activations: bool = False
    overlap: bool = False

    def __attrs_post_init__(self) -> None:
        live = self.live
        check_log_to(self.log_to)
        if self.atropos_url and self.trajectories:
            raise ConfigError("train from --atropos-url or from --trajectories, not both")
        if self.eval_items and not live:
            raise ConfigError("--eval-items runs with the live sampler only")
        if self.steps == 0 and not self.eval_items:
            raise ConfigError("--steps 0 only evaluates the starting weights: add --eval-items N")
        if self.eval_every and not self.eval_items:
            raise ConfigError("--eval-every needs --eval-items N: the held-out tasks it runs")
        if self.init_adapter is not None and self.tinker is not None:
            raise ConfigError(
                "--init-adapter starts the local learner; a Tinker run starts from "
                "--tinker-model's weights"
            )
        if self.keep_activations and self.tinker is not None:
            raise ConfigError("--keep-activations is the local learner's: Tinker trains remotely")
        if self.overlap and (not live or self.tinker is not None):
            raise ConfigError(
                "--overlap samples with the embedded model during the local learner's update: "
                "not with --atropos-url, --trajectories or --tinker-model"
            )
        if self.objective not in ("grpo", "sft"):
            raise ConfigError(f"--objective must be grpo or sft, got {self.objective!r}")
        if not self.temperature > 0:
            raise ConfigError(f"--temperature must be > 0, got {self.temperature}")
        if live and self.objective == "grpo" and self.group_size < 2:
            raise ConfigError(
                "--group-size must be >= 2 for GRPO: a rollout's advantage is its reward "
                "against its group's, so a group of 1 never trains (--objective sft can)"
            )
        if self.tinker is not None and not live:
            raise ConfigError(
                "the Tinker API samples its own groups: no --atropos-url or --trajectories"
            )
        if self.resume and (self.atropos_url or self.tinker is not None):
            raise ConfigError(
                "--resume continues a run of the local learner on the live source or "
                "--trajectories (an Atropos environment's groups and a Tinker run's state are "
                "not replayed)"
            )
        if self.sandbox not in SANDBOXES:
            raise ConfigError(
                f"--sandbox must be one of {', '.join(SANDBOXES)}, got {self.sandbox!r}"
            )
        chosen = self.sandbox_image or self.ray_address or self.ray_python
        if not live and (self.sandbox != defaults.SANDBOX.value or chosen):
            raise ConfigError(
                "--sandbox, --sandbox-image, --ray-address and --ray-python choose the live "
                "source's sandboxes: with --atropos-url or --trajectories the rollouts ran "
                "elsewhere"
            )
        if self.tinker is not None:
            self._tinker_objective()
        if self.optimizer.warmup_steps >= self.steps and self.optimizer.warmup_steps:
            raise ConfigError(
                f"--warmup-steps ({self.optimizer.warmup_steps}) must be < --steps ({self.steps})"
            )
        if self.optimizer.minibatches > self.groups_per_step:
            raise ConfigError(
                f"--minibatches ({self.optimizer.minibatches}) splits a step's groups: it must "
                f"be <= --groups-per-step ({self.groups_per_step})"
            )
        if self.tinker is not None and self.temperature != 1.0:
            raise ConfigError(
                "the Tinker API reports and scores logprobs at temperature 1: pass --temperature 1"
            )

    def _tinker_objective(self) -> None:
        """The Tinker learner runs today's objective only: one ``ppo`` step per batch, token
        normalisation, clip 0.8-1.2 (its server's), a constant learning rate, no KL term."""
        given = attrs.asdict(self.optimizer)
        default = attrs.asdict(OptimizerSpec(learning_rate=self.optimizer.learning_rate))
        changed = [_option(k) for k in given if given[k] != default[k]]
        if changed:
            raise ConfigError(
                f"{', '.join(changed)}: the local learner's; the Tinker learner (--tinker-model) "
                "takes one ppo step per batch at a constant --learning-rate"
            )

    @property
    def live(self) -> bool:
        """Rollouts come from the live source (sampled by this run), not from Atropos or
        batch runner files."""
        return not (self.atropos_url or self.trajectories)

    @property
    def environment_options(self) -> dict[str, Any]:
        """The environment's options: ``env_options``, over ``families``/``difficulties`` and
        the terminal toolset for ``endless_terminals``."""
        if self.env != ENDLESS:
            return dict(self.env_options)
        endless = {
            "families": list(self.families),
            "difficulties": list(self.difficulties),
            "toolsets": ["terminal"],
        }
        return {**endless, **self.env_options}

    @property
    def adapter_path(self) -> Path:
        """Where the adapter is written after every update (atomically replaced)."""
        return self.adapter or self.output / "adapter.gguf"


#: options a resumed run may change (they do not change what a step computes)
RESUMABLE = frozenset(
    {"steps", "threads", "checkpoint_every", "eval_every", "resume", "log_to", "wandb_project"}
    | {"sandbox", "sandbox_image", "ray_address", "ray_python", "keep_activations"}
)


def _json_value(_instance: object, _field: object, value: object) -> object:
    return str(value) if isinstance(value, Path) else value


def config_record(config: TrainConfig) -> dict[str, Any]:
    """The run's configuration as JSON data (written to ``run.json``)."""
    data: dict[str, Any] = json.loads(
        json.dumps(attrs.asdict(config, value_serializer=_json_value))
    )
    return data


def resume_differences(recorded: Mapping[str, Any], config: TrainConfig) -> list[str]:
    """The options of ``config`` that differ from a recorded ``run.json`` (those in
    :data:`RESUMABLE` aside; ``--steps`` too when a decaying ``--lr-schedule`` spans it), each
    as ``--option: recorded X, given Y``; the optimizer's fields each as their own option."""
    given = _flat(config_record(config))
    mine = _flat(recorded)
    resumable = RESUMABLE
    if config.optimizer.lr_schedule != "constant":
        resumable = RESUMABLE - {"steps"}
    keys = sorted((set(mine) | set(given)) - resumable)
    return [
        f"{_option(k)}: recorded {mine.get(k)!r}, given {given.get(k)!r}"
        for k in keys
        if mine.get(k) != given.get(k)
    ]


def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with the optimizer's fields at the top (each is its own option)."""
    flat = {k: v for k, v in record.items() if k != "optimizer"}
    optimizer = record.get("optimizer")
    if isinstance(optimizer, Mapping):  # a run recorded before a knob existed had its default
        flat.update({**attrs.asdict(OptimizerSpec()), **optimizer})
    return flat
