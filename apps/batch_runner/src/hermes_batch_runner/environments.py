"""``--env NAME`` or ``--dataset FILE`` -> an environment and the items of this run."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv, EnvRegistry, EnvSpec
from hermes_protocols import AgentResult, Environment, Item, Message, RewardContext, Score, Slot

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.dataset import DatasetEnvironment, load_dataset

DATASET_TOOLSETS = ("terminal", "file")


def build_registry() -> EnvRegistry:
    """Every environment shipped with hermes-envs, by name."""
    specs: list[EnvSpec[Any]] = [
        EnvSpec(
            "endless_terminals",
            EndlessTerminalsConfig,
            EndlessTerminalsEnv,
            "procedural terminal tasks with end-state verifiers",
        )
    ]
    try:
        from hermes_envs.swe_smith import SweSmithConfig, SweSmithOracleEnv
    except ImportError:  # pragma: no cover - depends on the installed hermes-envs
        pass
    else:
        specs.append(
            EnvSpec(
                "swe_smith_oracle",
                SweSmithConfig,
                SweSmithOracleEnv,
                "SWE-smith bug fixes verified by pytest node ids",
            )
        )
    return EnvRegistry(specs)


@attrs.frozen(slots=True)
class SystemPromptOverride:
    """An environment whose system prompt is ``--system-prompt`` instead of its own."""

    inner: Environment
    system_prompt: str

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def toolsets(self) -> Sequence[str]:
        return self.inner.toolsets

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        return self.inner.items(seed=seed, split=split)

    def prompt(self, item: Item) -> Sequence[Message]:
        rest = [m for m in self.inner.prompt(item) if m.role != "system"]
        return [Message.system(self.system_prompt), *rest]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        return await self.inner.setup_workspace(item, slot)

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        return await self.inner.verify(item, result, ctx)


def build_environment(config: RunConfig) -> tuple[Environment, list[Item]]:
    """The environment of the run and its first ``item_limit`` items (deterministic by seed)."""
    environment: Environment
    if config.dataset:
        loaded = load_dataset(config.dataset, skip_bad_lines=config.on_bad_line == "skip")
        environment = DatasetEnvironment(
            loaded.items, DATASET_TOOLSETS, system_prompt=config.system_prompt
        )
    else:
        environment = build_registry().create(config.env)
        if config.system_prompt:
            environment = SystemPromptOverride(environment, config.system_prompt)
    items = environment.items(seed=config.seed)
    limit = config.item_limit
    chosen = list(items if limit is None else itertools.islice(items, limit))
    return environment, chosen
