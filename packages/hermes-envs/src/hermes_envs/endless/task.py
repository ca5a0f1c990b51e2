"""A generated terminal task: setup files, instruction, oracle script and end-state checks."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

import attrs
from hermes_protocols import Slot

from hermes_envs.shell import run_checked, write_files

CHECK_TIMEOUT = 30.0


@attrs.frozen(slots=True)
class FileEquals:
    """``path`` exists with exactly ``content`` (or equal after stripping trailing space).

    A file the model left missing, a directory or a path out of the workspace fails the check
    (``OSError``); a slot that cannot be read raises (infrastructure, never a 0.0 reward)."""

    path: str
    content: bytes
    strip: bool = True

    async def passes(self, slot: Slot) -> bool:
        try:
            data = await slot.read_file(self.path)
        except OSError:
            return False
        if self.strip:
            return data.rstrip() == self.content.rstrip()
        return data == self.content


@attrs.frozen(slots=True)
class JsonEquals:
    """``path`` holds JSON equal to ``value`` (missing or invalid JSON fails the check; a slot
    that cannot be read raises)."""

    path: str
    value: object

    async def passes(self, slot: Slot) -> bool:
        try:
            return bool(json.loads(await slot.read_file(self.path)) == self.value)
        except (OSError, ValueError):
            return False


@attrs.frozen(slots=True)
class CommandOutput:
    """``command`` (run in the workspace) exits 0 and prints ``stdout`` (stripped)."""

    command: str
    stdout: str

    async def passes(self, slot: Slot) -> bool:
        result = await slot.exec(self.command, timeout=CHECK_TIMEOUT)
        return result.ok and result.stdout.strip() == self.stdout.strip()


@attrs.frozen(slots=True)
class PathMissing:
    path: str

    async def passes(self, slot: Slot) -> bool:
        result = await slot.exec(f"test -e {shlex.quote(self.path)}", timeout=CHECK_TIMEOUT)
        return result.exit_code == 1


@attrs.frozen(slots=True)
class FileMode:
    """``path`` has permission bits ``mode`` (octal, like ``0o755``)."""

    path: str
    mode: int

    async def passes(self, slot: Slot) -> bool:
        return await CommandOutput(
            f"stat -c %a {shlex.quote(self.path)}", format(self.mode, "o")
        ).passes(slot)


Check = FileEquals | JsonEquals | CommandOutput | PathMissing | FileMode


def _files(value: Mapping[str, bytes | str]) -> dict[str, bytes]:
    return {k: v.encode() if isinstance(v, str) else v for k, v in value.items()}


def _checks(value: Sequence[Check]) -> tuple[Check, ...]:
    return tuple(value)


@attrs.frozen(slots=True)
class TerminalTask:
    """Everything one endless-terminals task needs; regenerated from (family, seed, level)."""

    family: str
    difficulty: int
    seed: int
    instruction: str
    files: Mapping[str, bytes] = attrs.field(converter=_files)
    solution: str
    checks: tuple[Check, ...] = attrs.field(converter=_checks)
    setup_script: str = ""

    async def setup(self, slot: Slot, *, timeout: float) -> None:
        await write_files(slot, self.files)
        if self.setup_script:
            await run_checked(slot, self.setup_script, timeout=timeout, what="task setup")

    async def check(self, slot: Slot) -> list[bool]:
        return [await c.passes(slot) for c in self.checks]


@attrs.frozen(slots=True)
class Draft:
    """What a family generator returns; the environment adds family, seed and difficulty."""

    instruction: str
    files: Mapping[str, bytes | str]
    solution: str
    checks: Sequence[Check]
    setup_script: str = ""
