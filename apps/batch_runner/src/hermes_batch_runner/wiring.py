"""The real components: hermes-envs environment and rollout runner, hermes-sandbox pool and
tools, hermes-loop agent loop and model, hermes-parsers parser."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from hermes_envs import RolloutRunner, RunnerConfig, ToolsetSelection
from hermes_loop import AgentLoop, LoopLimits
from hermes_protocols import Environment, Item, SamplingParams, ScoredRollout, SlotPool, Toolset
from hermes_sandbox import SlotPool as SandboxPool

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials
from hermes_batch_runner.environments import build_environment
from hermes_batch_runner.inference import ModelParts, open_model
from hermes_batch_runner.records import rollout_id
from hermes_batch_runner.sandboxes import build_backend, build_toolsets, pool_config

#: seconds the loop's per-tool-call budget adds to --command-timeout
TOOL_TIMEOUT_MARGIN_S = 15.0
#: seconds the runner's agent phase adds to --rollout-timeout (the loop stops itself first)
AGENT_PHASE_MARGIN_S = 60.0


def rollout_seed(seed: int, record_id: str) -> int:
    """A sampling seed per rollout: reproducible, and different for each group member."""
    digest = hashlib.sha256(f"{seed}:{record_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


class RunnerComponents:
    """Rollouts through the hermes-envs runner; toolsets resolved once per item (group)."""

    def __init__(
        self,
        config: RunConfig,
        environment: Environment,
        items: Sequence[Item],
        pool: SlotPool,
        parts: ModelParts,
        toolsets: Sequence[Toolset],
    ) -> None:
        self._config = config
        self._environment = environment
        self._items = tuple(items)
        self._pool = pool
        self._parts = parts
        self._toolsets = tuple(toolsets)
        self._selection = ToolsetSelection(
            enabled=config.enabled_toolsets,
            disabled=config.disabled_toolsets,
            distribution=config.distribution,
        )
        self._runner_config = RunnerConfig(
            group_size=config.group_size,
            agent_timeout=config.rollout_timeout + AGENT_PHASE_MARGIN_S,
        )
        self._chosen: dict[int, tuple[Toolset, ...]] = {}

    @property
    def env_name(self) -> str:
        return self._environment.name

    @property
    def items(self) -> Sequence[Item]:
        return self._items

    @property
    def model(self) -> str:
        return self._parts.name

    async def save_tokenizer(self, target: Path) -> bool:
        """Copy the model's ``tokenizer.json`` to ``target`` (token text for the report)."""
        directory = self._parts.tokenizer_dir
        source = directory / "tokenizer.json" if directory is not None else None
        if source is None or not source.is_file():
            return False
        await anyio.to_thread.run_sync(shutil.copyfile, source, target)
        return True

    @property
    def model_parts(self) -> ModelParts:
        """The loop's model (e.g. to reach the embedded backend in a benchmark)."""
        return self._parts

    def _agent(self, seed: int) -> AgentLoop:
        config = self._config
        return AgentLoop(
            self._parts.model,
            sampling=SamplingParams(
                temperature=config.temperature, max_tokens=config.max_tokens, seed=seed
            ),
            limits=LoopLimits(
                max_turns=config.max_turns,
                max_tokens_per_turn=config.max_tokens,
                max_context_tokens=config.context_tokens - 1,
                rollout_timeout_s=config.rollout_timeout,
                tool_timeout_s=config.command_timeout + TOOL_TIMEOUT_MARGIN_S,
            ),
        )

    def _runner(self, seed: int) -> RolloutRunner:
        return RolloutRunner(
            self._environment,
            self._pool,
            self._agent(seed),
            self._toolsets,
            config=self._runner_config,
        )

    def check_toolsets(self) -> None:
        """Resolve the first group's toolsets now, so a bad name fails before any rollout."""
        if self._items:
            self._group_toolsets(0)

    def _group_toolsets(self, item_index: int) -> tuple[Toolset, ...]:
        found = self._chosen.get(item_index)
        if found is None:
            found = self._runner(0).resolve_toolsets(
                self._selection, seed=self._config.seed + item_index
            )
            self._chosen[item_index] = found
        return found

    async def run_one(self, item: Item, item_index: int, group_index: int) -> ScoredRollout:
        record_id = rollout_id(self.env_name, item.id, group_index)
        runner = self._runner(rollout_seed(self._config.seed, record_id))
        return await runner.run_rollout(
            item, self._group_toolsets(item_index), group_index=group_index
        )


def pool_name(run_key: str) -> str:
    """A pool name unique to the run directory (so a resumed run sweeps its own orphans)."""
    digest = hashlib.sha256(str(Path(run_key).resolve()).encode()).hexdigest()[:10]
    return f"batch-{digest}"


@asynccontextmanager
async def real_components(
    config: RunConfig, *, credentials: Credentials
) -> AsyncIterator[RunnerComponents]:
    """Build everything a run needs; the pool and the model are released on exit."""
    environment, items = build_environment(config)
    toolsets = build_toolsets(config)
    backend = build_backend(config, credentials)
    pool_cfg = pool_config(config, pool_name(config.output or "default"))
    async with open_model(config, credentials) as parts, SandboxPool(backend, pool_cfg) as pool:
        components = RunnerComponents(config, environment, items, pool, parts, toolsets)
        components.check_toolsets()
        yield components
