"""The shipped environments as a registry: ``default_registry().create("endless_terminals")``."""

from __future__ import annotations

from hermes_envs.endless import EndlessTerminalsConfig, EndlessTerminalsEnv
from hermes_envs.registry import EnvRegistry, EnvSpec
from hermes_envs.swe_smith import SweSmithConfig, SweSmithOracleEnv
from hermes_envs.terminal_bench import TerminalBenchConfig, TerminalBenchEnv


def default_registry() -> EnvRegistry:
    """A fresh registry holding the three shipped environments; register your own on it."""
    return EnvRegistry(
        [
            EnvSpec(
                "endless_terminals",
                EndlessTerminalsConfig,
                EndlessTerminalsEnv,
                "procedural terminal tasks (29 families, 3 levels) with oracle solutions",
            ),
            EnvSpec(
                "swe_smith_oracle",
                SweSmithConfig,
                SweSmithOracleEnv,
                "SWE-smith bug fixes verified with the rows' pytest node ids",
            ),
            EnvSpec(
                "terminal_bench",
                TerminalBenchConfig,
                TerminalBenchEnv,
                "Terminal-Bench 2 / Harbor tasks, hidden tests uploaded at verification",
            ),
        ]
    )
