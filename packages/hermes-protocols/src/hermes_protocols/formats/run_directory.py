"""The batch runner's run directory: which file holds what."""

from __future__ import annotations

from pathlib import Path

import attrs

#: the run's resolved configuration (its presence marks a run directory)
RUN_FILE = "run.json"
#: the three exactly-once logs and the status of their records
STATUS_LOGS: tuple[tuple[str, str], ...] = (
    ("trajectories.jsonl", "kept"),
    ("failed.jsonl", "failed"),
    ("filtered.jsonl", "filtered"),
)


@attrs.frozen(slots=True)
class RunDirectory:
    """Where each output of a batch run lives under ``root``."""

    root: Path

    @property
    def trajectories(self) -> Path:
        """Kept rollouts (trajectory records)."""
        return self.root / STATUS_LOGS[0][0]

    @property
    def failed(self) -> Path:
        """Rollouts that failed after their retries."""
        return self.root / STATUS_LOGS[1][0]

    @property
    def filtered(self) -> Path:
        """Rollouts the filters left out of the dataset."""
        return self.root / STATUS_LOGS[2][0]

    @property
    def logs(self) -> tuple[Path, Path, Path]:
        """The three exactly-once logs; every finished rollout id is in exactly one."""
        return (self.trajectories, self.failed, self.filtered)

    @property
    def status_logs(self) -> tuple[tuple[Path, str], ...]:
        """Each log with the status of its records (``kept``, ``failed``, ``filtered``)."""
        return tuple((self.root / name, status) for name, status in STATUS_LOGS)

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def tokenizer(self) -> Path:
        """The model's ``tokenizer.json`` (token mode), read by the report for token text."""
        return self.root / "tokenizer.json"

    @property
    def run(self) -> Path:
        return self.root / RUN_FILE

    def holds_a_run(self) -> bool:
        """Whether ``root`` has any of the run's logs."""
        return any(path.is_file() for path in self.logs)
