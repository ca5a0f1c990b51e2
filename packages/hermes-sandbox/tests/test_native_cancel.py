"""A caller cancelled with asyncio's ``Task.cancel()`` (a foreign framework's ``gather``, its
own task bookkeeping) cuts through AnyIO's shields: the slot reset it waited on goes on in an
abandoned worker thread. The host's close must still leave nothing behind."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import anyio
import pytest
from hermes_sandbox import BwrapBackend, BwrapConfig
from hermes_sandbox.backends._workspace_fs import mounts_beneath
from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.directory_host import DirectoryHost

pytestmark = pytest.mark.anyio

#: how long the reset's worker thread is held in the slot's ``kill_all``
HELD_S = 1.0


async def test_a_reset_abandoned_by_task_cancel_mounts_nothing_after_close(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = BwrapBackend(BwrapConfig(root_dir=str(sandbox_root)))
    host = await backend.start_host(HostSpec("cut", "cut--0", 1))
    assert isinstance(host, DirectoryHost)
    slot = host.slot(0)
    entered = threading.Event()
    kill_all = slot.kill_all

    def held_kill_all() -> None:  # the reset's call only: the close's goes straight through
        if not entered.is_set():
            entered.set()
            time.sleep(HELD_S)
        kill_all()

    monkeypatch.setattr(slot, "kill_all", held_kill_all)
    reset = asyncio.get_running_loop().create_task(host.reset_slot(0))
    assert await anyio.to_thread.run_sync(entered.wait, 30)
    started = time.monotonic()
    reset.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reset
    assert time.monotonic() - started < HELD_S / 2, "Task.cancel() no longer abandons the thread"
    await host.close()
    # the abandoned thread has had its time; whatever it did, the host must stay removed
    await anyio.sleep(max(0.0, started + HELD_S + 1.0 - time.monotonic()))
    assert mounts_beneath(host.directory) == []
    assert not await anyio.Path(host.directory).exists()
