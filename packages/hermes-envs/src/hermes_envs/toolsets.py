"""Toolset selection for a group: explicit enabled/disabled lists or a seeded distribution.

A :class:`ToolsetDistribution` follows hermes-agent's ``toolset_distributions`` format: each
toolset has an independent inclusion probability in percent; when nothing is rolled, the most
likely toolset is used so the agent never ends up with no tools.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import (
    ConfigError,
    SandboxError,
    SandboxTimeout,
    Slot,
    Tool,
    ToolResult,
    Toolset,
    WorkspaceEscape,
)


def _percentages(value: Mapping[str, float]) -> dict[str, float]:
    checked = dict(value)
    for name, percent in checked.items():
        if not 0.0 <= percent <= 100.0:
            raise ConfigError(f"toolset {name!r}: probability {percent} is not within 0..100")
    return checked


@attrs.frozen(slots=True)
class ToolsetDistribution:
    """Independent inclusion probabilities (percent) per toolset name."""

    name: str
    probabilities: Mapping[str, float] = attrs.field(converter=_percentages)
    description: str = ""

    def sample(self, rng: random.Random) -> tuple[str, ...]:
        chosen = tuple(n for n, p in self.probabilities.items() if rng.random() * 100.0 < p)
        if chosen or not self.probabilities:
            return chosen
        return (max(self.probabilities.items(), key=lambda kv: kv[1])[0],)


def _names(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _names_required(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class ToolsetSelection:
    """How a group picks its toolsets.

    ``enabled`` (explicit list) and ``distribution`` (a name looked up in the runner's
    distributions, sampled with the group seed) are mutually exclusive; with neither, every
    toolset the environment allows is used. ``disabled`` is removed last.
    """

    enabled: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    disabled: tuple[str, ...] = attrs.field(default=(), converter=_names_required)
    distribution: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.enabled is not None and self.distribution is not None:
            raise ConfigError("give either enabled toolsets or a distribution, not both")


def resolve_toolsets(
    available: Sequence[Toolset],
    allowed: Sequence[str],
    selection: ToolsetSelection,
    *,
    distributions: Mapping[str, ToolsetDistribution],
    rng: random.Random,
) -> tuple[Toolset, ...]:
    """Pick the toolsets for one group; raises :class:`ConfigError` on unknown names or none."""
    by_name = {t.name: t for t in available}
    for name in (*(selection.enabled or ()), *selection.disabled):
        if name not in by_name:
            raise ConfigError(f"unknown toolset {name!r}; available: {sorted(by_name)}")
    if selection.distribution is not None:
        try:
            dist = distributions[selection.distribution]
        except KeyError:
            raise ConfigError(
                f"unknown toolset distribution {selection.distribution!r}; "
                f"known: {sorted(distributions)}"
            ) from None
        wanted: Sequence[str] = dist.sample(rng)
    elif selection.enabled is not None:
        wanted = selection.enabled
    else:
        wanted = tuple(allowed)
    names = [n for n in wanted if n in allowed and n in by_name and n not in selection.disabled]
    if not names:
        raise ConfigError(
            f"no toolset left for this group (wanted {list(wanted)}, environment allows "
            f"{list(allowed)}, available {sorted(by_name)}, disabled {list(selection.disabled)})"
        )
    return tuple(by_name[n] for n in dict.fromkeys(names))


class SlotToolExecutor:
    """A :class:`hermes_protocols.ToolExecutor` running the group's tools against one slot.

    Sandbox errors are re-raised for the loop to report and also recorded (except
    ``WorkspaceEscape`` and ``SandboxTimeout``, which the model causes), so the runner can tell
    a dead slot (infrastructure) from a model mistake.
    """

    def __init__(self, toolsets: Sequence[Toolset], slot: Slot) -> None:
        self._tools: dict[str, Tool] = {}
        for toolset in toolsets:
            for tool in toolset.tools:
                self._tools.setdefault(tool.schema.name, tool)
        self._slot = slot
        self.sandbox_errors: list[str] = []

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(f"unknown tool {name!r}; available: {sorted(self._tools)}", True)
        try:
            return await tool(self._slot, arguments)
        except (WorkspaceEscape, SandboxTimeout):
            raise  # the model's doing: a path outside the workspace, a command that overran
        except SandboxError as exc:
            self.sandbox_errors.append(f"{name}: {type(exc).__name__}: {exc}")
            raise
