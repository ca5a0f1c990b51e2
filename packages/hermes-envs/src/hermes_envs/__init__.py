"""hermes-envs: the rollout runner, the reward context and the shipped environments."""

from hermes_envs.context import SlotRewardContext
from hermes_envs.endless import EndlessTerminalsConfig, EndlessTerminalsEnv
from hermes_envs.errors import DatasetError, PhaseTimeout, SetupError
from hermes_envs.registry import EnvRegistry, EnvSpec
from hermes_envs.runner import RolloutRunner, RunnerConfig, RunSummary
from hermes_envs.toolsets import (
    SlotToolExecutor,
    ToolsetDistribution,
    ToolsetSelection,
    resolve_toolsets,
)

__all__ = [
    "DatasetError",
    "EndlessTerminalsConfig",
    "EndlessTerminalsEnv",
    "EnvRegistry",
    "EnvSpec",
    "PhaseTimeout",
    "RolloutRunner",
    "RunSummary",
    "RunnerConfig",
    "SetupError",
    "SlotRewardContext",
    "SlotToolExecutor",
    "ToolsetDistribution",
    "ToolsetSelection",
    "resolve_toolsets",
]
