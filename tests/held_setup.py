"""An environment plugin whose workspace setup holds a worker thread in a shielded scope (as
the pool's slot release does), writing ``<marker>.entered`` when the thread starts and
``<marker>.done`` when it ends; the driven-episode test closes an episode in between."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import anyio
import attrs
from hermes_protocols import Item, Message, SandboxError

#: how long the setup's worker thread runs
HELD_S = 1.0


@attrs.frozen
class HeldSetupConfig:
    """``marker``: the path prefix of the files the setup writes."""

    marker: str


def _hold(marker: str) -> None:
    Path(f"{marker}.entered").touch()
    time.sleep(HELD_S)
    Path(f"{marker}.done").touch()


class HeldSetup:
    """The setup runs a worker thread that must not be abandoned, then fails."""

    name = "held_setup"
    toolsets = ("terminal",)

    def __init__(self, config: HeldSetupConfig) -> None:
        self.config = config

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        yield Item(id=f"held-{split}-{seed}", data={}, split=split)

    def prompt(self, item: Item) -> list[Message]:
        return [Message.user("Write ok to out.txt.")]

    async def setup_workspace(self, item: Item, slot: object) -> NoReturn:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_hold, self.config.marker)
        raise SandboxError("the held setup ended")

    async def verify(self, item: Item, result: object, ctx: object) -> NoReturn:
        raise AssertionError("never verified")
