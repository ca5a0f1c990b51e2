"""hermes-envs: the rollout runner, the reward context and the shipped environments."""

from hermes_envs._wrapped import WrappedEnvironment
from hermes_envs.catalog import default_registry
from hermes_envs.context import SlotRewardContext
from hermes_envs.endless import EndlessTerminalsConfig, EndlessTerminalsEnv
from hermes_envs.errors import DatasetError, PhaseTimeout, SetupError
from hermes_envs.oracle import HasOracle, IdleAgent, ScriptAgent
from hermes_envs.prompt_override import SystemPromptOverride, with_system_prompt
from hermes_envs.registry import EnvRegistry, EnvSpec
from hermes_envs.runner import (
    RolloutRunner,
    RunnerConfig,
)
from hermes_envs.swe_smith import SweSmithConfig, SweSmithOracleEnv
from hermes_envs.terminal_bench import TerminalBenchConfig, TerminalBenchEnv
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
    "HasOracle",
    "IdleAgent",
    "PhaseTimeout",
    "RolloutRunner",
    "RunnerConfig",
    "ScriptAgent",
    "SetupError",
    "SlotRewardContext",
    "SlotToolExecutor",
    "SweSmithConfig",
    "SweSmithOracleEnv",
    "SystemPromptOverride",
    "TerminalBenchConfig",
    "TerminalBenchEnv",
    "ToolsetDistribution",
    "ToolsetSelection",
    "WrappedEnvironment",
    "default_registry",
    "resolve_toolsets",
    "with_system_prompt",
]
