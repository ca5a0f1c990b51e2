"""Small helpers for running setup commands and writing files in a slot."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from hermes_protocols import ExecResult, Slot

from hermes_envs.errors import SetupError


async def run_checked(slot: Slot, command: str, *, timeout: float, what: str) -> ExecResult:
    """Run ``command`` in the slot; raise :class:`SetupError` with its output if it fails."""
    result = await slot.exec(command, timeout=timeout)
    if not result.ok:
        output = result.stderr.strip()[-2000:] or result.stdout[-2000:]
        raise SetupError(
            f"{what} failed in slot {slot.slot_id} (exit {result.exit_code}, "
            f"timed_out={result.timed_out}): {output}"
        )
    return result


async def write_files(slot: Slot, files: Mapping[str, bytes]) -> None:
    """Write each ``path -> bytes`` into the slot, creating parent directories first."""
    parents = sorted({p.rsplit("/", 1)[0] for p in files if "/" in p.strip("/")})
    if parents:
        await run_checked(
            slot,
            "mkdir -p -- " + " ".join(shlex.quote(p) for p in parents),
            timeout=60,
            what="mkdir",
        )
    for path, data in files.items():
        await slot.write_file(path, data)
