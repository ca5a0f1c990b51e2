"""The closed loop: sample groups with the current weights, score, update, hot-load, repeat.

Each step takes the next ``groups_per_step`` items of the environment, runs ``group_size``
rollouts of each through :mod:`hermes_rollouts` (the embedded model, real sandboxes, the
environment's verifier), builds the GRPO batch, runs one learner update in a worker thread,
writes the LoRA adapter as a GGUF and loads it into the embedded model, so the next step
samples from the updated weights. Metrics go to ``metrics.jsonl`` and ``reward.png`` after
every step; :meth:`Trainer.evaluate` runs held-out tasks with the current weights.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import attrs
from hermes_loop import ModelSpec
from hermes_loop.embedded.model_file import resolve_model_path
from hermes_protocols import ConfigError, Item, ScoredRollout
from hermes_rollouts import (
    AgentBudgets,
    EnvironmentSpec,
    PoolSpec,
    RolloutSession,
    RolloutSpec,
    SamplingSpec,
    ToolsetSpec,
    derive_seed,
    open_session,
)

from hermes_trainer.config import TrainConfig
from hermes_trainer.gguf_weights import read_base_weights
from hermes_trainer.grpo import Batch, build_batch
from hermes_trainer.learner import LoraLearner, UpdateStats
from hermes_trainer.lora import write_gguf_adapter
from hermes_trainer.metrics import Evaluation, StepMetrics, append_jsonl, plot

StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[Evaluation], None]

#: the trainer's options, for the assembly's error messages
OPTION_NAMES = {
    "environment.options": "--families / --difficulties",
    "environment.prefill_messages": "--prefill-messages",
    "budgets.max_turns": "--max-turns",
    "budgets.max_tokens_per_turn": "--max-tokens",
    "sampling.temperature": "--temperature",
    "model.gguf_path": "--model",
    "model.threads": "--threads",
}


def rollout_spec(config: TrainConfig) -> RolloutSpec:
    """The sampling side of a run: the embedded model (one KV sequence, as measured in
    docs/training.md), terminal tool only, the run's environment, budgets and temperature."""
    return RolloutSpec(
        model=ModelSpec(
            gguf_path=config.model,
            context_tokens=config.context_tokens,
            concurrency=1,
            threads=config.threads,
        ),
        pool=PoolSpec(name=f"trainer-{config.seed}", slots_per_host=config.group_size),
        environment=EnvironmentSpec(
            name="endless_terminals",
            options={
                "families": list(config.families),
                "difficulties": list(config.difficulties),
                "toolsets": ["terminal"],
            },
            system_prompt=config.system_prompt,
            prefill_messages=config.prefill_messages,
        ),
        toolsets=ToolsetSpec(enabled=("terminal",)),
        budgets=AgentBudgets(
            max_turns=config.max_turns,
            max_tokens_per_turn=config.max_tokens,
            rollout_timeout_s=config.rollout_timeout_s,
        ),
        sampling=SamplingSpec(temperature=config.temperature),
    )


async def _sample(
    session: RolloutSession, items: Iterator[Item], config: TrainConfig, step: int
) -> list[list[ScoredRollout]]:
    groups = []
    for item in itertools.islice(items, config.groups_per_step):
        seed = derive_seed(config.seed, f"step-{step}/{item.id}")
        groups.append(await session.run_group(item, seed=seed, group_size=config.group_size))
    return groups


def _generated_tokens(groups: list[list[ScoredRollout]]) -> int:
    return sum(
        sum(r.result.trace.mask)
        for group in groups
        for r in group
        if r.result is not None and r.result.trace is not None
    )


class Trainer:
    """A started run: the rollout session, the learner and the output files. :meth:`step` runs
    one step; the sampler uses the learner's latest weights from the step after an update."""

    def __init__(self, config: TrainConfig, session: RolloutSession, learner: LoraLearner) -> None:
        load_lora = session.model.load_lora
        if load_lora is None:
            raise ConfigError("the trainer needs the embedded model (it hot-loads LoRA adapters)")
        self.config = config
        self.session = session
        self.learner = learner
        self.output = Path(config.output)
        self.adapter_path = self.output / "adapter.gguf"
        self.metrics_path = self.output / "metrics.jsonl"
        self.history: list[StepMetrics] = []
        self._load_lora = load_lora
        self._items = session.items(seed=config.seed)
        #: the batch the last step built (what it trained on)
        self.last_batch: Batch | None = None

    async def step(self, step: int) -> StepMetrics:
        """Sample this step's groups, update, write and load the adapter, record metrics."""
        config = self.config
        started = anyio.current_time()
        groups = await _sample(self.session, self._items, config, step)
        sampled = anyio.current_time()
        batch = build_batch(groups)
        stats: UpdateStats | None = None
        if batch.groups:
            stats = await anyio.to_thread.run_sync(self.learner.update, batch.groups)
            await anyio.to_thread.run_sync(
                write_gguf_adapter, self.adapter_path, self.learner.lora_arrays(), config.lora.alpha
            )
            await self._load_lora(self.adapter_path)
        sample_s = sampled - started
        rewards = batch.rewards
        metrics = StepMetrics(
            step=step,
            rollouts=sum(len(g) for g in groups),
            mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
            pass_rate=sum(r >= 1.0 for r in rewards) / len(rewards) if rewards else 0.0,
            trained_groups=len(batch.groups),
            dropped_groups=batch.dropped_groups,
            failed_rollouts=batch.failed_rollouts,
            loss=None if stats is None else stats.loss,
            log_ratio_mean=None if stats is None else stats.log_ratio_mean,
            log_ratio_max=None if stats is None else stats.log_ratio_max,
            trainable_tokens=0 if stats is None else stats.trainable_tokens,
            train_tokens_per_s=None if stats is None else stats.tokens / stats.seconds,
            sample_tokens_per_s=_generated_tokens(groups) / max(sample_s, 1e-9),
            sample_s=round(sample_s, 3),
            update_s=round(anyio.current_time() - sampled, 3),
        )
        self.history.append(metrics)
        self.last_batch = batch
        await anyio.to_thread.run_sync(append_jsonl, self.metrics_path, metrics)
        await anyio.to_thread.run_sync(
            plot, self.output / "reward.png", self.history, _title(config)
        )
        return metrics

    async def evaluate(self, label: str) -> Evaluation:
        """The current weights on ``config.eval_items`` held-out tasks (the environment's
        ``test`` split, the same for every call), ``group_size`` rollouts each; appended to
        ``eval.jsonl``."""
        config = self.config
        items = self.session.items(split="test", seed=config.seed)
        rewards: list[float] = []
        failed = 0
        for item in itertools.islice(items, config.eval_items):
            seed = derive_seed(config.seed, f"eval/{item.id}")
            group = await self.session.run_group(item, seed=seed, group_size=config.group_size)
            scored = [r.score.reward for r in group if r.score is not None]
            failed += len(group) - len(scored)
            rewards.extend(scored)
        evaluation = Evaluation(
            label=label,
            after_step=len(self.history),
            rollouts=len(rewards),
            failed_rollouts=failed,
            mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        )
        await anyio.to_thread.run_sync(append_jsonl, self.output / "eval.jsonl", evaluation)
        return evaluation


@asynccontextmanager
async def open_trainer(config: TrainConfig) -> AsyncIterator[Trainer]:
    """Load the base weights into a learner, open the rollout session; closed on exit."""
    await anyio.Path(config.output).mkdir(parents=True, exist_ok=True)
    model_path = resolve_model_path(config.model)
    base = await anyio.to_thread.run_sync(read_base_weights, model_path)
    learner = await anyio.to_thread.run_sync(
        lambda: LoraLearner(
            base, config.lora, config.optimizer, temperature=config.temperature, seed=config.seed
        )
    )
    async with open_session(rollout_spec(config), option_names=OPTION_NAMES) as session:
        yield Trainer(config, session, learner)


async def train(
    config: TrainConfig,
    *,
    on_step: StepCallback | None = None,
    on_eval: EvalCallback | None = None,
) -> list[StepMetrics]:
    """Run ``config.steps`` steps into ``config.output`` (with ``eval_items``, an evaluation
    of the base weights before and of the trained ones after); return every step's metrics."""
    async with open_trainer(config) as trainer:
        if config.eval_items:
            before = await trainer.evaluate("base")
            if on_eval is not None:
                on_eval(before)
        for step in range(1, config.steps + 1):
            metrics = await trainer.step(step)
            if on_step is not None:
                on_step(metrics)
        if config.eval_items:
            after = await trainer.evaluate("trained")
            if on_eval is not None:
                on_eval(after)
        return trainer.history


def _title(config: TrainConfig) -> str:
    levels = ",".join(str(d) for d in config.difficulties)
    return f"{','.join(config.families)} (level {levels}), seed {config.seed}"


def _json_value(_instance: object, _field: object, value: object) -> object:
    return str(value) if isinstance(value, Path) else value


def config_record(config: TrainConfig) -> dict[str, object]:
    """The run's configuration as JSON-ready data (written to ``run.json``)."""
    return attrs.asdict(config, value_serializer=_json_value)
