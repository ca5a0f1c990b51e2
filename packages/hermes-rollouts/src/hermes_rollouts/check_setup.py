"""The environment check's setup check: ``setup_workspace`` on two fresh slots at once, each
within the timeout, gives the same metadata and the same files (outside ``.git``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import anyio
from hermes_protocols import Environment, HermesError, Item, Slot, SlotPool

from hermes_rollouts.check_items import one_line
from hermes_rollouts.check_report import CheckResult, Status

SETUP = "setup_workspace in time, repeatable"
#: every directory and every file's checksum, outside .git (commit objects hold timestamps)
FINGERPRINT = (
    "find . -path ./.git -prune -o -type d -print -o -type f -exec cksum {} + | LC_ALL=C sort"
)
FINGERPRINT_TIMEOUT_S = 120.0
ACQUIRE_TIMEOUT_S = 300.0


async def _setup(
    env: Environment, item: Item, slot: Slot, timeout_s: float
) -> tuple[Mapping[str, Any], str | None, float]:
    """Metadata, workspace fingerprint (``None``: the slot cannot list it) and seconds."""
    started = anyio.current_time()
    with anyio.fail_after(timeout_s):
        metadata = await env.setup_workspace(item, slot)
    seconds = anyio.current_time() - started
    listed = await slot.exec(FINGERPRINT, timeout=FINGERPRINT_TIMEOUT_S)
    return metadata, listed.stdout if listed.ok else None, seconds


async def check_setup(
    env: Environment, pool: SlotPool, item: Item, timeout_s: float
) -> CheckResult:
    """Set ``item`` up on two slots held at once and compare (see the module doc)."""
    slots: list[Slot] = []
    started = anyio.current_time()
    try:
        for n in range(2):
            slots.append(await pool.acquire(f"check-setup-{n}", timeout=ACQUIRE_TIMEOUT_S))
        first = await _setup(env, item, slots[0], timeout_s)
        second = await _setup(env, item, slots[1], timeout_s)
    except TimeoutError:
        detail = f"item {item.id!r}: setup_workspace took longer than {timeout_s:g}s"
        return CheckResult(SETUP, Status.FAIL, detail, anyio.current_time() - started)
    except Exception as exc:
        where = "acquiring a slot" if len(slots) < 2 else "setup_workspace"
        detail = f"item {item.id!r}: {where} raised {one_line(exc)}"[:400]
        return CheckResult(SETUP, Status.FAIL, detail, anyio.current_time() - started)
    finally:
        with anyio.CancelScope(shield=True):
            for slot in slots:
                await _release(pool, slot)
    seconds = anyio.current_time() - started
    took = f"{first[2]:.1f}s and {second[2]:.1f}s (limit {timeout_s:g}s)"
    if first[0] != second[0]:
        detail = f"item {item.id!r}: two setups returned different metadata"
        return CheckResult(SETUP, Status.FAIL, detail, seconds)
    if first[1] is None or second[1] is None:
        detail = f"{took}, same metadata; files not compared (find/cksum failed in the slot)"
        return CheckResult(SETUP, Status.PASS, detail, seconds)
    if first[1] != second[1]:
        differ = sorted(set(first[1].splitlines()) ^ set(second[1].splitlines()))
        detail = f"item {item.id!r}: two setups left different files: {differ[:3]}"
        return CheckResult(SETUP, Status.FAIL, detail[:400], seconds)
    count = len(first[1].splitlines())
    return CheckResult(SETUP, Status.PASS, f"{took}, same metadata and {count} entries", seconds)


async def _release(pool: SlotPool, slot: Slot) -> None:
    with contextlib.suppress(HermesError):  # the leak check reports what a failed reset left
        await pool.release(slot)
