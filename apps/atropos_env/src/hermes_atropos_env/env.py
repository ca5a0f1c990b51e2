"""``HermesAtroposEnv``: an atroposlib 0.4.0 ``BaseEnv`` running a hermes-envs environment.

Everything hermes-specific goes through a :class:`~hermes_atropos_env.source.RolloutSource`
opened around each of atroposlib's run loops (``env_manager`` for serve, ``process_manager``,
evaluation) and closed when the loop ends, fails or is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import anyio
from hermes_protocols import ConfigError, Item
from hermes_protocols.convert import messages_to_openai
from hermes_rollouts import prefill_messages

from hermes_atropos_env.atroposlib_import import BaseEnv, ScoredDataGroup
from hermes_atropos_env.config import (
    HermesAtroposEnvConfig,
    InferenceConfig,
    atropos_server_configs,
)
from hermes_atropos_env.display import format_rollout
from hermes_atropos_env.groups import GroupPolicy, build_group
from hermes_atropos_env.metrics import RolloutMetrics
from hermes_atropos_env.source import RolloutSource, RolloutSourceFactory

logger = logging.getLogger("hermes_atropos_env")


class HermesAtroposEnv(BaseEnv):  # type: ignore[misc]
    """Atropos environment adapter; construct it with :meth:`create` (explicit config)."""

    name = "hermes"
    env_config_cls = HermesAtroposEnvConfig

    config: HermesAtroposEnvConfig
    max_token_len: int

    def __init__(
        self,
        config: HermesAtroposEnvConfig,
        server_configs: Any,
        slurm: bool = False,
        testing: bool = False,
        *,
        inference: InferenceConfig | None = None,
        source_factory: RolloutSourceFactory | None = None,
    ) -> None:
        if inference is None or source_factory is None:
            raise ConfigError(
                "HermesAtroposEnv needs inference= and source_factory=; build it with "
                "HermesAtroposEnv.create(...) or the atropos_env CLI"
            )
        super().__init__(config, server_configs, slurm, testing)
        self.inference = inference
        self._source_factory = source_factory
        self._source: RolloutSource | None = None
        self._items: Iterator[Item] | None = None
        self._items_taken = 0
        self.train_metrics = RolloutMetrics(prefix="train")
        self.metrics_history: list[dict[str, float]] = []
        self._sequence_limit = config.max_token_length
        self._draining = False
        self._serving = False

    @classmethod
    def create(
        cls,
        config: HermesAtroposEnvConfig,
        inference: InferenceConfig,
        source_factory: RolloutSourceFactory,
    ) -> HermesAtroposEnv:
        """Build the env with a list-wrapped server config (never a bare one)."""
        return cls(
            config,
            atropos_server_configs(inference),
            inference=inference,
            source_factory=source_factory,
        )

    # ----------------------------------------------------------------- lifecycle
    @property
    def source(self) -> RolloutSource:
        if self._source is None:
            raise RuntimeError("the rollout source is only open inside a run loop")
        return self._source

    async def _with_source(self, run: Any) -> None:
        async with self._source_factory(self.config, self.inference) as source:
            self._source = source
            try:
                await run()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_workers()
                self._source = None

    async def _stop_workers(self) -> None:
        """Cancel atroposlib's rollout tasks (plain asyncio tasks) and wait for them, so no
        rollout outlives the pool and model it uses."""
        tasks = [t for t in [*self.workers, *self.eval_workers, self.eval_runner] if t]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=60)

    def stop_taking_items(self) -> None:
        """Drain: start no new group; those in flight finish (``process`` then ends its loop)."""
        self._draining = True

    @property
    def busy(self) -> bool:
        """Whether a group is still in flight. ``process`` and ``evaluate`` run one group at a
        time in their own loop, which ends once draining: busy until then."""
        if not self._serving:
            return True
        return any(not w.done() for w in [*self.workers, *self.eval_workers])

    def close_output(self) -> None:
        """Close ``process``'s JSONL writer (atroposlib closes it only when its loop ends)."""
        if self.jsonl_writer is not None:
            self.jsonl_writer.close()

    async def add_train_workers(self) -> None:
        if not self._draining:
            await super().add_train_workers()

    async def env_manager(self) -> None:
        self._serving = True
        await self._with_source(super().env_manager)

    async def process_manager(self) -> None:
        if self.max_token_len <= 0:  # no trainer in process mode: our own budget
            self.max_token_len = self.config.max_token_length
        await self._with_source(super().process_manager)

    async def _run_evaluate(self) -> None:
        await self._with_source(super()._run_evaluate)

    async def setup(self) -> None:
        self._items = self.source.items(split=self.config.dataset_split, seed=self.config.seed)
        self._items_taken = 0

    async def get_server_info(self) -> None:
        await super().get_server_info()
        batch_size, group_size = self.config.batch_size, self.config.group_size
        if batch_size > 0 and batch_size % group_size != 0:
            raise ConfigError(
                f"the trainer's batch_size ({batch_size}) is not a multiple of "
                f"--env.group_size ({group_size}): change group_size"
            )
        if self.max_token_len > 0:
            self._sequence_limit = min(self.config.max_token_length, self.max_token_len)

    # ------------------------------------------------------------------- items
    async def get_next_item(self) -> Item | None:
        if self._items is None:
            raise RuntimeError("setup() has not run")
        if self._draining:
            return None
        if self.config.max_items is not None and self._items_taken >= self.config.max_items:
            return None
        item = next(self._items, None)
        if item is not None:
            self._items_taken += 1
        return item

    # ------------------------------------------------------------------ groups
    def group_policy(self) -> GroupPolicy:
        return GroupPolicy(
            group_size=self.config.group_size,
            max_token_length=self._sequence_limit,
            overlong_policy=self.config.overlong_policy,
            token_mode=self.inference.token_mode,
        )

    def _generation_params(self) -> dict[str, Any]:
        return {
            "temperature": self.config.agent_temperature,
            "max_tokens_per_turn": self.config.max_tokens_per_turn,
            "max_agent_turns": self.config.max_agent_turns,
            "server_type": self.inference.server_type,
        }

    async def collect_trajectories(self, item: Item) -> tuple[ScoredDataGroup | None, list[Any]]:
        adapter = await self.source.sync_weights()
        rollouts = await self.source.run_group(item, self.config.group_size)
        outcome = build_group(
            rollouts,
            self.group_policy(),
            retokenize=None if self.inference.token_mode else self.source.retokenize,
            generation_params=self._generation_params(),
            group_overrides={
                "lora_adapter_sha256": adapter,
                # the report counts only the model's own tool calls, not a demonstration's
                "prefill_messages": max((prefill_messages(r) for r in rollouts), default=0),
            },
        )
        equal = outcome.group is not None and len(set(outcome.group["scores"])) == 1
        drop_equal = equal and bool(self.config.ensure_scores_are_not_same)
        self.train_metrics.add(outcome, equal_scores_dropped=drop_equal)
        for rollout, reason in outcome.excluded:
            detail = rollout.failure.message if rollout.failure else ""
            logger.warning("rollout %s excluded (%s) %s", rollout.id, reason, detail)
        if drop_equal:
            assert outcome.group is not None
            logger.warning(
                "item %s: all %d scores are %s; group dropped (ensure_scores_are_not_same is "
                "true: set it false to send such groups, or raise the task's pass rate)",
                item.id,
                len(outcome.group["scores"]),
                outcome.group["scores"][0],
            )
            return None, []
        if outcome.group is not None:
            logger.info(
                "item %s: group of %d, scores %s, %d tokens",
                item.id,
                len(outcome.usable),
                outcome.group["scores"],
                sum(len(t) for t in outcome.group["tokens"]),
            )
        else:
            logger.warning(
                "item %s: %d/%d usable rollouts, group not sent",
                item.id,
                len(outcome.usable),
                self.config.group_size,
            )
        return outcome.group, []

    # ----------------------------------------------------------------- logging
    async def add_rollouts_for_wandb(
        self, scored_data: ScoredDataGroup | list[ScoredDataGroup], item: Any = None
    ) -> None:
        groups = scored_data if isinstance(scored_data, list) else [scored_data]
        keep = self.config.num_rollouts_per_group_for_logging
        for group in groups:
            messages = group.get("messages") or []
            count = len(group["scores"]) if keep == -1 else min(keep, len(group["scores"]))
            self.rollouts_for_wandb.append(
                [(format_rollout(messages[i]), group["scores"][i]) for i in range(count)]
            )
        while len(self.rollouts_for_wandb) > self.config.num_rollouts_to_keep:
            self.rollouts_for_wandb.pop(0)

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        snapshot = self.train_metrics.snapshot()
        self.metrics_history.append(snapshot)
        metrics.update(snapshot)
        logger.info("metrics: %s", {k: round(v, 4) for k, v in sorted(metrics.items())})
        await super().wandb_log(metrics)

    # -------------------------------------------------------------- evaluation
    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Run the eval split (one rollout per item, at most ``max_items`` or 16 items) and
        write ``metrics.json`` and ``samples.jsonl`` through atroposlib's ``evaluate_log``."""
        start = time.time()
        limit = self.config.max_items or 16
        eval_metrics = RolloutMetrics(prefix="eval")
        samples: list[dict[str, Any]] = []
        items = self.source.items(split=self.config.eval_split, seed=self.config.seed)
        policy = GroupPolicy(
            group_size=1,
            max_token_length=self._sequence_limit,
            overlong_policy=self.config.overlong_policy,
            token_mode=self.inference.token_mode,
        )
        for _, item in zip(range(limit), items, strict=False):
            if self._draining:  # interrupted: the metrics cover the items done
                break
            rollouts = await self.source.run_group(item, 1)
            outcome = build_group(
                rollouts,
                policy,
                retokenize=None if self.inference.token_mode else self.source.retokenize,
            )
            eval_metrics.add(outcome)
            for rollout in rollouts:
                result = rollout.result
                samples.append(
                    {
                        "item_id": item.id,
                        "rollout_id": rollout.id,
                        "reward": rollout.score.reward if rollout.score else None,
                        "failure": rollout.failure.message if rollout.failure else None,
                        "stop_reason": str(result.stop_reason) if result else None,
                        "turns": result.turns if result else 0,
                        "messages": messages_to_openai(result.messages) if result else [],
                    }
                )
        await self.evaluate_log(
            eval_metrics.snapshot(),
            task_name=f"{self.source.environment_name}_eval",
            model_name=self.inference.model_name,
            start_time=start,
            end_time=time.time(),
            generation_parameters=self._generation_params(),
            samples=samples,
        )
