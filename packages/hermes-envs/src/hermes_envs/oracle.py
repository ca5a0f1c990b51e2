"""Capability Protocol of environments that can produce a known-good solution per item."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hermes_protocols import Item


@runtime_checkable
class HasOracle(Protocol):
    """``oracle_solution(item)`` is a bash script that, run in the workspace after setup,
    makes ``verify`` return 1.0 (used by tests, sanity checks and reward audits)."""

    def oracle_solution(self, item: Item) -> str: ...
