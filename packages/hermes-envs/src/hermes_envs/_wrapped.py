"""A base for environments that change one thing of another environment and delegate the rest."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import (
    AgentResult,
    Environment,
    ImageEnvironment,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
    SlotImage,
)


@attrs.frozen(slots=True)
class WrappedEnvironment:
    """Everything of ``inner``: name, toolsets, items, prompt, workspace setup, verification,
    and the items' own images when ``inner`` has them. Subclasses override what they change."""

    inner: Environment

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def toolsets(self) -> Sequence[str]:
        return self.inner.toolsets

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        return self.inner.items(seed=seed, split=split)

    def prompt(self, item: Item) -> Sequence[Message]:
        return self.inner.prompt(item)

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        return await self.inner.setup_workspace(item, slot)

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        return await self.inner.verify(item, result, ctx)

    def image_for(self, item: Item) -> SlotImage | None:
        return self.inner.image_for(item) if isinstance(self.inner, ImageEnvironment) else None

    def for_sandbox(self, *, runs_images: bool) -> Environment:
        """This wrapper around ``inner`` set up for the sandbox (itself when ``inner`` has no
        images)."""
        if not isinstance(self.inner, ImageEnvironment):
            return self
        return attrs.evolve(self, inner=self.inner.for_sandbox(runs_images=runs_images))
