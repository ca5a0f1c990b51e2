"""The live source: sample groups with the embedded model in this process, hot-load updates.

Each step takes the next ``groups_per_step`` items of the environment and runs ``group_size``
rollouts of each through :mod:`hermes_rollouts` (the embedded model, real sandboxes, the
environment's verifier). :meth:`LiveSource.publish` loads the new adapter into the embedded
model, so the next step samples from the updated weights; :meth:`LiveSource.evaluate` runs
held-out tasks with the current weights. Every rollout of a step or an evaluation goes to the
run's :class:`~hermes_trainer.rollout_log.RolloutLog` (``OUTPUT/rollouts``).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
from hermes_protocols import ConfigError, Environment, ScoredRollout
from hermes_protocols.formats import TrainingTag, training_rollouts
from hermes_rollouts import (
    ModelOpener,
    RolloutSession,
    derive_seed,
    hf_tokenizer_dir,
    open_session,
    validate,
)
from hermes_rollouts import spec as specs

from hermes_trainer.config import TrainConfig
from hermes_trainer.rollout_log import RolloutLog
from hermes_trainer.samples import from_rollout
from hermes_trainer.source import Collected, Weights

#: the trainer's options, for the assembly's error messages
OPTION_NAMES = {
    "environment.name": "--env",
    "environment.options": "--env-options",
    "environment.prefill_messages": "--prefill-messages",
    "budgets.max_turns": "--max-turns",
    "budgets.max_tokens_per_turn": "--max-tokens",
    "sampling.temperature": "--temperature",
    "model.gguf_path": "--model",
    "model.threads": "--threads",
    "sandbox.kind": "--sandbox",
    "sandbox.image": "--sandbox-image",
    "sandbox.ray_address": "--ray-address",
}


def rollout_spec(config: TrainConfig) -> specs.RolloutSpec:
    """The sampling side of a run: the embedded model (one KV sequence, as measured in
    docs/training.md), the run's sandboxes (one host of a group's slots), terminal tool only,
    the run's environment, budgets and temperature."""
    return specs.RolloutSpec(
        model=specs.ModelSpec(
            gguf_path=config.model,
            context_tokens=config.context_tokens,
            concurrency=1,
            threads=config.threads,
        ),
        sandbox=specs.SandboxSpec(
            kind=config.sandbox,
            image=config.sandbox_image,
            ray_address=config.ray_address,
            ray_python=config.ray_python,
            rollout_timeout_s=config.rollout_timeout_s,
        ),
        pool=specs.PoolSpec(name=f"trainer-{config.seed}", slots_per_host=config.group_size),
        environment=specs.EnvironmentSpec(
            name=config.env,
            options=config.environment_options,
            system_prompt=config.system_prompt,
            prefill_messages=config.prefill_messages,
        ),
        toolsets=specs.ToolsetSpec(enabled=("terminal",)),
        budgets=specs.AgentBudgets(
            max_turns=config.max_turns,
            max_tokens_per_turn=config.max_tokens,
            rollout_timeout_s=config.rollout_timeout_s,
        ),
        sampling=specs.SamplingSpec(temperature=config.temperature),
    )


def _generated_tokens(groups: list[list[ScoredRollout]]) -> int:
    return sum(
        sum(r.result.trace.mask)
        for group in groups
        for r in group
        if r.result is not None and r.result.trace is not None
    )


class LiveSource:
    """Groups sampled in this process; see the module doc."""

    def __init__(self, config: TrainConfig, session: RolloutSession, log: RolloutLog) -> None:
        load_lora = session.model.load_lora
        if load_lora is None:
            raise ConfigError("the trainer's sampler must load the weights it trains")
        self.config = config
        self.session = session
        #: where every sampled rollout is recorded
        self.log = log
        self._load_lora = load_lora
        self._items = session.items(seed=config.seed)
        self._taken = 0

    async def collect(self, step: int) -> Collected:
        """Step ``step``'s items: the ``groups_per_step`` after those of the steps before it
        (a resumed run skips the items of the steps it already made)."""
        config = self.config
        started = anyio.current_time()
        first = (step - 1) * config.groups_per_step
        if first < self._taken:
            raise ValueError(f"step {step}'s items were already taken")
        items = itertools.islice(self._items, first - self._taken, None)
        self._taken = first + config.groups_per_step
        groups = []
        for item in itertools.islice(items, config.groups_per_step):
            seed = derive_seed(config.seed, f"step-{step}/{item.id}")
            groups.append(
                list(await self.session.run_group(item, seed=seed, group_size=config.group_size))
            )
        await self._record([r for group in groups for r in group], TrainingTag.train(step))
        samples = tuple(
            tuple(from_rollout(rollout, config.temperature) for rollout in group)
            for group in groups
        )
        return Collected(
            groups=samples,
            generated_tokens=_generated_tokens(groups),
            seconds=anyio.current_time() - started,
            policy_lag=0.0,
        )

    async def publish(self, adapter: Weights, step: int) -> None:
        await self._load_lora(adapter)

    async def evaluate(
        self,
        label: str,
        after_step: int,
        on_item: Callable[[int, int], None] = lambda done, total: None,
    ) -> list[float | None]:
        """The rewards of the current weights (after ``after_step`` updates; evaluation
        ``label``) on ``config.eval_items`` held-out tasks (the environment's ``test`` split,
        the same for every call), ``group_size`` rollouts each (``None``: the rollout failed);
        ``on_item(done, total)`` after each task. The rollouts are recorded once all ran."""
        config = self.config
        items = self.session.items(split="test", seed=config.seed)
        rollouts: list[ScoredRollout] = []
        for done, item in enumerate(itertools.islice(items, config.eval_items), start=1):
            seed = derive_seed(config.seed, f"eval/{item.id}")
            rollouts.extend(
                await self.session.run_group(item, seed=seed, group_size=config.group_size)
            )
            on_item(done, config.eval_items)
        await self._record(rollouts, TrainingTag.evaluation(label, after_step))
        return [r.score.reward if r.score is not None else None for r in rollouts]

    async def _record(self, rollouts: list[ScoredRollout], tag: TrainingTag) -> None:
        model = self.session.model_name
        await anyio.to_thread.run_sync(lambda: self.log.append(rollouts, tag, model=model))


def live_environment(config: TrainConfig) -> Environment:
    """The run's environment, resolved and built (one :class:`ConfigError` naming the
    trainer's options when it cannot be): done first, before any weights load."""
    return validate(rollout_spec(config), OPTION_NAMES)


def _tokenizer_json(config: TrainConfig, spec: specs.RolloutSpec) -> Path | None:
    """The sampler's ``tokenizer.json`` (the embedded model's export, or the Tinker model's
    tokenizer directory's); ``None`` when there is none. Blocking."""
    directory = (
        hf_tokenizer_dir(spec.model) if config.tinker is None else Path(config.tinker.tokenizer_dir)
    )
    return None if directory is None else directory / "tokenizer.json"


@asynccontextmanager
async def open_live(
    config: TrainConfig,
    model: ModelOpener | None = None,
    environment: Environment | None = None,
) -> AsyncIterator[LiveSource]:
    """Start the rollout session (sandboxes and the embedded model, or ``model``: the Tinker
    sampler; ``environment``: the one :func:`live_environment` built); released on exit. The
    rollout log starts empty unless the run resumes (:meth:`Trainer.resume` trims it)."""
    spec = rollout_spec(config)
    log = RolloutLog(training_rollouts(config.output))
    async with open_session(
        spec, option_names=OPTION_NAMES, model=model, environment=environment
    ) as session:

        def prepare() -> None:
            tokenizer = _tokenizer_json(config, spec)
            if config.resume:
                log.copy_tokenizer(tokenizer)
            else:
                log.start(tokenizer)

        await anyio.to_thread.run_sync(prepare)
        yield LiveSource(config, session, log)
