"""An environment whose system prompt is replaced (``--system-prompt`` of the apps)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import AgentResult, Environment, Item, Message, RewardContext, Score, Slot


@attrs.frozen(slots=True)
class SystemPromptOverride:
    """``inner`` with its system message(s) replaced by one ``system_prompt`` message.

    Everything else (name, toolsets, items, workspace setup, verification) is ``inner``'s.
    """

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


def with_system_prompt(environment: Environment, system_prompt: str | None) -> Environment:
    """``environment`` itself when ``system_prompt`` is empty, else the override."""
    if not system_prompt:
        return environment
    return SystemPromptOverride(environment, system_prompt)
