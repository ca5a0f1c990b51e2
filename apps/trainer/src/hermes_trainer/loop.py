"""The training loop: collect a step's groups, build the batch, update, publish the adapter.

Each step takes its groups from the run's source (:mod:`hermes_trainer.source`: sampled live
with the embedded model, pulled from an Atropos ``run-api``, or read from batch runner
trajectories), builds the batch (:mod:`hermes_trainer.grpo`), runs one learner update in a
worker thread, writes the LoRA adapter as a GGUF (atomically) and publishes it to the source,
so live and Atropos sampling continue from the updated weights. Metrics go to
``metrics.jsonl`` (and ``--log-to``'s loggers, :mod:`hermes_trainer.loggers`) and
``reward.png`` after every step, the local learner's checkpoint to
``checkpoint.npz`` (:mod:`hermes_trainer.checkpoint`), from which :meth:`Trainer.resume`
continues; with the live source, :meth:`Trainer.evaluate` runs held-out tasks with the
current weights.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import attrs
from hermes_protocols import Environment
from hermes_rollouts import Interruption, cancel_when_set, reference_slug, resolve_model_path

from hermes_trainer.atropos_feed import open_atropos_feed
from hermes_trainer.checkpoint import read_checkpoint, write_checkpoint
from hermes_trainer.config import ENDLESS, TrainConfig, config_record
from hermes_trainer.gguf_weights import read_base_weights
from hermes_trainer.grpo import Batch, build_batch
from hermes_trainer.learner import LoraLearner, UpdateStats
from hermes_trainer.live import LiveSource, live_environment, open_live
from hermes_trainer.loggers import MetricsLogger, open_loggers
from hermes_trainer.lora import read_gguf_adapter
from hermes_trainer.metrics import (
    Evaluation,
    StepMetrics,
    append_jsonl,
    plot,
    read_evaluations,
    read_jsonl,
    rewrite_jsonl,
)
from hermes_trainer.source import BatchSource, Collected, Learner, LocalLearner, Weights
from hermes_trainer.tinker_api import TinkerLearner, open_tinker, tinker_model
from hermes_trainer.trajectories import open_trajectories

StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[Evaluation], None]
#: ``(label, tasks done, tasks in all)`` after each held-out task of an evaluation
EvalProgress = Callable[[str, int, int], None]


def _metrics(
    step: int,
    collected: Collected,
    batch: Batch,
    stats: UpdateStats | None,
    update_s: float,
    weights: Weights | None,
) -> StepMetrics:
    rewards = batch.rewards
    tokens = collected.generated_tokens
    return StepMetrics(
        step=step,
        rollouts=sum(len(g) for g in collected.groups),
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
        sample_tokens_per_s=(
            None if tokens is None or not collected.seconds else tokens / collected.seconds
        ),
        sample_s=round(collected.seconds, 3),
        update_s=round(update_s, 3),
        policy_lag=collected.policy_lag,
        weights=None if weights is None else str(weights),
        learning_rate=None if stats is None else stats.learning_rate,
        clip_fraction=None if stats is None else stats.clip_fraction,
        kl=None if stats is None else stats.kl,
    )


class Trainer:
    """A started run: the source, the learner and the output files. :meth:`step` runs one
    step; live and Atropos sampling use the learner's latest weights after an update."""

    def __init__(self, config: TrainConfig, source: BatchSource, learner: Learner) -> None:
        self.config = config
        self.source = source
        self.learner = learner
        self.output = Path(config.output)
        self.metrics_path = self.output / "metrics.jsonl"
        self.eval_path = self.output / "eval.jsonl"
        self.history: list[StepMetrics] = []
        #: the batch the last step built (what it trained on)
        self.last_batch: Batch | None = None
        #: the held-out evaluations so far (drawn on ``reward.png``)
        self.evaluations: list[Evaluation] = []
        #: where each line of ``metrics.jsonl`` and ``eval.jsonl`` also goes (``--log-to``)
        self.loggers: Sequence[MetricsLogger] = ()
        #: set when the run is to end after the current step (a sampling ahead stops)
        self.drain = anyio.Event()
        #: with ``overlap``: the next step and its groups, sampled during this step's update
        self._ahead: tuple[int, Collected | None] | None = None

    async def step(self, step: int) -> StepMetrics | None:
        """Collect this step's groups, update, write and publish the adapter, record metrics;
        ``None`` when the source has nothing left."""
        config = self.config
        ahead, self._ahead = self._ahead, None
        collected = ahead[1] if ahead and ahead[0] == step else await self.source.collect(step)
        if collected is None:
            return None
        started = anyio.current_time()
        waited = 0.0  # for the groups sampled ahead, after the update was done
        batch = build_batch(
            collected.groups, objective=config.objective, min_reward=config.min_reward
        )
        stats: UpdateStats | None = None
        weights: Weights | None = None
        if batch.groups:
            async with anyio.create_task_group() as tg:
                if config.overlap and step < config.steps:
                    tg.start_soon(self._collect_ahead, step + 1)
                stats = await self.learner.update(batch.groups)
                weights = saved = await self.learner.save(step)
                updated = anyio.current_time()
            waited = anyio.current_time() - updated
            await self.source.publish(saved, step)
        update_s = anyio.current_time() - started - waited
        metrics = _metrics(step, collected, batch, stats, update_s, weights)
        self.history.append(metrics)
        self.last_batch = batch
        await self._append(self.metrics_path, metrics)
        if isinstance(self.learner, LocalLearner) and step % config.checkpoint_every == 0:
            state = await anyio.to_thread.run_sync(self.learner.learner.state)
            await anyio.to_thread.run_sync(write_checkpoint, self.output, step, state)
        await self._plot()
        return metrics

    async def _collect_ahead(self, step: int) -> None:
        """Step ``step``'s groups, sampled by the weights before the update now running
        (policy lag 1); given up when the run drains."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_set, self.drain, tg.cancel_scope)
            collected = await self.source.collect(step)
            lagged = None if collected is None else attrs.evolve(collected, policy_lag=1.0)
            self._ahead = (step, lagged)
            tg.cancel_scope.cancel()

    async def begin(self) -> int:
        """The step the run continues after: the checkpoint's with ``resume`` (:meth:`resume`),
        else 0. The sampler then runs the learner's weights when they are not the base
        model's (``--init-adapter``'s, or a checkpoint's after updates)."""
        step = await self.resume() if self.config.resume else 0
        if isinstance(self.learner, LocalLearner) and (
            self.learner.learner.steps or self.config.init_adapter is not None
        ):
            await self.source.publish(await self.learner.save(step), step)
        return step

    async def resume(self) -> int:
        """Continue from the run's checkpoint: the learner's state, the metrics and
        evaluations up to its step (later lines, written after it, are dropped: those steps
        run again, and so are their rollouts in ``rollouts/``); returns its step (0: the run
        wrote no checkpoint and starts again)."""
        if not isinstance(self.learner, LocalLearner):
            raise TypeError("only the local learner resumes")
        checkpoint = await anyio.to_thread.run_sync(read_checkpoint, self.output)
        step = 0
        if checkpoint is not None:
            step, state = checkpoint
            await anyio.to_thread.run_sync(self.learner.learner.restore, state)
        history = await anyio.to_thread.run_sync(read_jsonl, self.metrics_path)
        self.history = [m for m in history if m.step <= step]
        await anyio.to_thread.run_sync(rewrite_jsonl, self.metrics_path, self.history)
        evaluations = await anyio.to_thread.run_sync(read_evaluations, self.eval_path)
        self.evaluations = [e for e in evaluations if e.after_step <= step]
        await anyio.to_thread.run_sync(rewrite_jsonl, self.eval_path, self.evaluations)
        if isinstance(self.source, LiveSource):
            kept = {(e.label, e.after_step) for e in self.evaluations}
            await anyio.to_thread.run_sync(self.source.log.keep, step, kept)
        await self._plot()
        return step

    async def _append(self, path: Path, record: StepMetrics | Evaluation) -> None:
        """One line to ``path``, and the same record to each of :attr:`loggers`."""
        await anyio.to_thread.run_sync(append_jsonl, path, record)
        for logger in self.loggers:
            await anyio.to_thread.run_sync(logger.log, record)

    async def _plot(self) -> None:
        await anyio.to_thread.run_sync(
            plot, self.output / "reward.png", self.history, _title(self.config), self.evaluations
        )

    async def evaluate(
        self, label: str, on_progress: EvalProgress = lambda label, done, total: None
    ) -> Evaluation:
        """The current weights on the held-out tasks (:meth:`LiveSource.evaluate`), appended
        to ``eval.jsonl`` and drawn on ``reward.png``; ``on_progress`` after each task."""
        if not isinstance(self.source, LiveSource):
            raise TypeError("held-out evaluation needs the live source")
        after_step = len(self.history)
        results = await self.source.evaluate(label, after_step, partial(on_progress, label))
        rewards = [r for r in results if r is not None]
        evaluation = Evaluation(
            label=label,
            after_step=after_step,
            rollouts=len(rewards),
            failed_rollouts=len(results) - len(rewards),
            mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        )
        await self._append(self.eval_path, evaluation)
        self.evaluations.append(evaluation)
        await self._plot()
        return evaluation


def open_source(
    config: TrainConfig, model_path: Path, environment: Environment | None
) -> AbstractAsyncContextManager[BatchSource]:
    """The run's source (see :class:`TrainConfig`; ``environment``: the live source's)."""
    if config.atropos_url:
        return open_atropos_feed(
            config.atropos_url,
            batch_size=config.groups_per_step * config.group_size,
            max_token_len=config.context_tokens,
            steps=config.steps,
            timeout_s=config.atropos_timeout_s,
        )
    if config.trajectories:
        return open_trajectories(
            config.trajectories,
            model_path.name if config.objective == "grpo" else None,
            per_step=config.groups_per_step,
            epochs=config.epochs,
            seed=config.seed,
        )
    return open_live(config, environment=environment)


@asynccontextmanager
async def open_trainer(config: TrainConfig) -> AsyncIterator[Trainer]:
    """Start the learner (the base weights in a local LoRA learner, or a Tinker training
    client) and the source; closed on exit. The live source's environment is resolved first,
    so a wrong ``--env`` fails before any weights load."""
    environment = live_environment(config) if config.live else None
    await anyio.Path(config.output).mkdir(parents=True, exist_ok=True)
    if config.tinker is not None:
        async with open_tinker(config.tinker, rank=config.lora.rank, seed=config.seed) as run:
            learner = TinkerLearner(
                run.training,
                config.optimizer,
                objective=config.objective,
                timeout_s=config.tinker.timeout_s,
            )
            async with open_live(config, tinker_model(run), environment) as source:
                yield Trainer(config, source, learner)
        return
    # the file the sampler loads too (the default: the shipped GGUF converted once to Q8_0)
    model_path = await anyio.to_thread.run_sync(resolve_model_path, config.model)
    base = await anyio.to_thread.run_sync(read_base_weights, model_path)
    start = config.init_adapter
    initial = None if start is None else await anyio.to_thread.run_sync(read_gguf_adapter, start)
    local = await anyio.to_thread.run_sync(
        lambda: LoraLearner(
            base,
            config.lora,
            config.optimizer,
            objective=config.objective,
            seed=config.seed,
            start=None if initial is None else initial.lora,
            steps=config.steps,
            budget_tokens=config.max_tokens * config.max_turns,
            remat=not config.keep_activations,
        )
    )
    async with open_source(config, model_path, environment) as source:
        yield Trainer(config, source, LocalLearner(local, config.adapter_path, config.lora.alpha))


async def train(
    config: TrainConfig,
    *,
    on_step: StepCallback | None = None,
    on_eval: EvalCallback | None = None,
    on_eval_progress: EvalProgress = lambda label, done, total: None,
    interruption: Interruption | None = None,
) -> list[StepMetrics]:
    """Run up to ``config.steps`` steps into ``config.output`` (fewer when the source runs
    out; with ``eval_items``, an evaluation of the starting weights before, every
    ``eval_every`` steps and of the trained ones after; with ``resume``, from the run's
    checkpoint on); return every step's metrics. With ``interruption``
    (:mod:`hermes_rollouts.signal_policy`), a drain ends the run after the current step (the
    trained weights are not evaluated) and a cancel cuts the current step short."""
    stop = interruption if interruption is not None else Interruption()
    async with open_trainer(config) as trainer:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as work:
                tg.start_soon(cancel_when_set, stop.cancel, work)
                start = await trainer.begin()
                async with open_loggers(
                    config.log_to,
                    trainer.output,
                    start=start if config.resume else None,
                    project=config.wandb_project,
                    config=config_record(config),
                ) as loggers:
                    trainer.loggers = loggers
                    trainer.drain = stop.drain
                    evaluate = partial(_evaluate, trainer, on_eval, on_eval_progress)
                    if config.eval_items and _due(config, start):  # a resumed run's included
                        await evaluate(f"step {start}" if start else _first_label(config))
                    for step in range(start + 1, config.steps + 1):
                        if stop.drain.is_set():
                            break
                        metrics = await trainer.step(step)
                        if metrics is None:
                            break
                        if on_step is not None:
                            on_step(metrics)
                        if _due(config, step) and not stop.drain.is_set():
                            await evaluate(f"step {step}")
                    if config.eval_items and not stop.drain.is_set():
                        await evaluate("trained")
            tg.cancel_scope.cancel()
        return trainer.history


async def _evaluate(
    trainer: Trainer, on_eval: EvalCallback | None, on_progress: EvalProgress, label: str
) -> None:
    """Run :meth:`Trainer.evaluate` unless the current weights already were (a resumed run
    that had reached this evaluation)."""
    if trainer.evaluations and trainer.evaluations[-1].after_step == len(trainer.history):
        return
    evaluation = await trainer.evaluate(label, on_progress)
    if on_eval is not None:
        on_eval(evaluation)


def _due(config: TrainConfig, step: int) -> bool:
    """Whether the weights after ``step`` get a held-out evaluation of their own: before the
    first step, and every ``eval_every`` steps (the last step's is the final ``trained``
    one)."""
    periodic = config.eval_every > 0 and step % config.eval_every == 0
    return step == 0 or (periodic and step < config.steps)


def _first_label(config: TrainConfig) -> str:
    """The label of the evaluation before the first step: the weights the run starts from."""
    return "base" if config.init_adapter is None else "init-adapter"


def _title(config: TrainConfig) -> str:
    if config.tinker is not None:
        return f"Tinker {config.tinker.base_model}, seed {config.seed}"
    if config.atropos_url:
        return f"Atropos run-api {config.atropos_url}, seed {config.seed}"
    if config.trajectories:
        names = ", ".join(path.name for path in config.trajectories)
        return f"{config.objective} on {names}, seed {config.seed}"
    if config.env != ENDLESS:
        return f"{reference_slug(config.env)}, seed {config.seed}"
    levels = ",".join(str(d) for d in config.difficulties)
    return f"{','.join(config.families)} (level {levels}), seed {config.seed}"
