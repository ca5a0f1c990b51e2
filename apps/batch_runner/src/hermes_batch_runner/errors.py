"""Errors of the batch runner; each message says what to change."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols.errors import ConfigError, HermesError


class BatchRunnerError(HermesError):
    """Base class for batch-runner failures that end a run with a clear message."""


class OutputDirError(BatchRunnerError, OSError):
    """The output directory cannot be created or written."""


class CorruptLogError(BatchRunnerError):
    """A JSONL log has an invalid line that is not a torn last line (cannot repair safely)."""


class ResumeMismatch(ConfigError):
    """``--resume`` was given options that differ from the run's recorded config."""

    def __init__(self, keys: Sequence[str], details: str) -> None:
        self.keys = tuple(keys)
        super().__init__(details)
