"""An environment plugin whose every workspace setup fails (the sandbox's fault, never the
model's): the adapters' tests load it from this file to check that an infrastructure failure
fails the run instead of becoming a 0.0 reward."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NoReturn

from hermes_protocols import Item, Message, SandboxError


class BrokenSetup:
    """Every workspace setup fails: the sandbox's fault, never the model's."""

    name = "broken_setup"
    toolsets = ("terminal",)

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        yield Item(id=f"broken-{split}-{seed}", data={}, split=split)

    def prompt(self, item: Item) -> list[Message]:
        return [Message.user("Write ok to out.txt.")]

    async def setup_workspace(self, item: Item, slot: object) -> NoReturn:
        raise SandboxError("the host went away")

    async def verify(self, item: Item, result: object, ctx: object) -> NoReturn:
        raise AssertionError("never verified")
