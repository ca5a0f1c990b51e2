"""The environment check's typed report: one row per check, and the table it prints."""

from __future__ import annotations

import enum

import attrs
from hermes_protocols import JSONObject


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@attrs.frozen(slots=True)
class CheckResult:
    """One check: its name, outcome, what it found (one line) and its seconds."""

    name: str
    status: Status
    detail: str
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL


@attrs.frozen(slots=True)
class EnvironmentCheckReport:
    """What :func:`hermes_rollouts.check_environment` found for ``environment`` on the
    ``sandbox`` backend; :attr:`passed` when no check failed. ``records`` are the oracle's and
    the do-nothing agent's rollouts as the batch runner writes them (when they could be)."""

    environment: str
    sandbox: str
    items: int
    results: tuple[CheckResult, ...]
    seconds: float
    records: tuple[JSONObject, ...] = ()

    @property
    def passed(self) -> bool:
        return not any(r.failed for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.failed)

    def result(self, name: str) -> CheckResult:
        """The row of check ``name``."""
        return next(r for r in self.results if r.name == name)

    def table(self) -> str:
        """The pass/fail table, one row per check, and a closing line with the counts."""
        width = max(len(r.name) for r in self.results)
        lines = [f"environment check: {self.environment} on {self.sandbox}, {self.items} item(s)"]
        for r in self.results:
            lines.append(
                f"  {r.status.upper():<4}  {r.name:<{width}}  {r.seconds:6.1f}s  {r.detail}"
            )
        counts = {s: sum(r.status is s for r in self.results) for s in Status}
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(
            f"{verdict}: {counts[Status.PASS]} passed, {counts[Status.FAIL]} failed, "
            f"{counts[Status.SKIP]} skipped in {self.seconds:.1f}s"
        )
        return "\n".join(lines)
