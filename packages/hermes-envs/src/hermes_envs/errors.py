"""Errors raised by the rollout runner and the shipped environments."""

from __future__ import annotations

from hermes_protocols import ConfigError, HermesError


class PhaseTimeout(HermesError, TimeoutError):
    """A rollout phase (acquire, setup, agent, verify) overran its timeout."""

    def __init__(self, phase: str, timeout: float) -> None:
        super().__init__(
            f"rollout phase {phase!r} did not finish within {timeout:g}s; "
            f"raise RunnerConfig.{phase}_timeout if this is expected"
        )
        self.phase = phase
        self.timeout = timeout


class SetupError(HermesError):
    """A workspace could not be prepared (a command failed, a repository is unreachable)."""


class DatasetError(ConfigError):
    """A dataset file, row or task directory is malformed or cannot be loaded (the user's
    input: the message names the file and what to fix)."""
