"""Bounded-memory file reads: a size cap for whole reads, a streamed window of lines.

A slot can make a file of any size for free (a sparse file). Nothing here loads more than the
cap, a window of lines, or one chunk of a file into this process.
"""

from __future__ import annotations

from typing import BinaryIO, Protocol, runtime_checkable

import attrs
from hermes_protocols import SandboxError

DEFAULT_MAX_READ_BYTES = 64 << 20
"""Largest file ``Slot.read_file`` returns whole on the directory backends (local, bwrap)."""

_CHUNK = 1 << 20
_SNIFF = 8192
_MAX_COUNT_BYTES = 256 << 20


class FileTooLarge(SandboxError):
    """A whole-file read of a file over the cap; read a window or use the terminal instead."""

    def __init__(self, path: str, size: int, cap: int) -> None:
        super().__init__(
            f"{path!r} is {size / (1 << 20):.1f} MiB, over the {cap / (1 << 20):.0f} MiB limit "
            "of whole-file reads; read it in windows (read_file offset/limit) or inspect it with "
            "the terminal (head, tail, grep)"
        )
        self.path = path
        self.size = size
        self.cap = cap


@attrs.frozen(slots=True)
class TextWindow:
    """Lines ``first``..``first+len(lines)-1`` of a file (without line ends).

    ``total_lines`` is ``None`` when the file is too large to count cheaply; ``binary`` is set
    (and ``lines`` empty) when the file looks binary (a NUL byte in its first 8 KiB).
    """

    first: int
    lines: tuple[str, ...]
    total_lines: int | None
    size: int
    binary: bool = False
    long_lines: bool = False


@runtime_checkable
class WindowedFiles(Protocol):
    """Slots that can read parts of a file without loading it (local, bwrap, server slots)."""

    async def read_window(
        self, path: str, first: int, max_lines: int, max_line_bytes: int
    ) -> TextWindow: ...

    async def read_capped(self, path: str, max_bytes: int) -> bytes: ...


def read_capped(f: BinaryIO, path: str, size: int, cap: int) -> bytes:
    """Read all of ``f`` (``size`` bytes per fstat), refusing more than ``cap`` bytes."""
    if size > cap:
        raise FileTooLarge(path, size, cap)
    data = f.read(cap + 1)
    if len(data) > cap:  # grew since the fstat
        raise FileTooLarge(path, len(data), cap)
    return data


def _read_line(f: BinaryIO, max_line_bytes: int) -> tuple[bytes, bool]:
    """One line (at most ``max_line_bytes`` kept; the rest is skipped in chunks)."""
    line = f.readline(max_line_bytes)
    if not line or line.endswith(b"\n"):
        return line, False
    while True:
        rest = f.readline(_CHUNK)
        if not rest or rest.endswith(b"\n"):
            return line, True


def read_window(
    f: BinaryIO, size: int, first: int, max_lines: int, max_line_bytes: int
) -> TextWindow:
    """Stream ``f`` to lines ``first``.. (1-based), keep at most ``max_lines`` of them."""
    if b"\x00" in f.read(_SNIFF):
        return TextWindow(first, (), None, size, binary=True)
    number = _skip_lines(f, first - 1)
    kept: list[str] = []
    long_lines = False
    while len(kept) < max_lines:
        line, cut = _read_line(f, max_line_bytes)
        if not line:
            break
        number += 1
        kept.append(line.rstrip(b"\n").rstrip(b"\r").decode("utf-8", "replace"))
        long_lines = long_lines or cut
    total: int | None = number
    if len(kept) == max_lines:
        total = _count_rest(f, number)
    return TextWindow(first, tuple(kept), total, size, long_lines=long_lines)


def _skip_lines(f: BinaryIO, count: int) -> int:
    """Seek ``f`` to the start of line ``count + 1`` (chunked); return the lines skipped."""
    f.seek(0)
    skipped = 0
    last = b"\n"
    while skipped < count:
        start = f.tell()
        chunk = f.read(_CHUNK)
        if not chunk:
            return skipped + (0 if last == b"\n" else 1)  # a last line without its newline
        last = chunk[-1:]
        newlines = chunk.count(b"\n")
        if skipped + newlines < count:
            skipped += newlines
            continue
        end = -1
        for _ in range(count - skipped):
            end = chunk.index(b"\n", end + 1)
        f.seek(start + end + 1)
        return count
    return skipped


def _count_rest(f: BinaryIO, counted: int) -> int | None:
    scanned = f.tell()
    total = counted
    last = b"\n"
    while scanned < _MAX_COUNT_BYTES:
        chunk = f.read(_CHUNK)
        if not chunk:
            return total + (0 if last == b"\n" else 1)
        total += chunk.count(b"\n")
        last = chunk[-1:]
        scanned += len(chunk)
    return None
