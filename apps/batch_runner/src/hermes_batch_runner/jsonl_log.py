"""An append-only JSONL log with exactly-once ids that survives ``kill -9``.

Each record is one ``os.write`` of a full line on an ``O_APPEND`` descriptor followed by
``fsync``, so after a crash the file is every acknowledged record plus at most one torn last
line. :func:`recover_log` drops that torn tail (truncating the file) and returns the ids already
present, which a resumed run skips.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import attrs
from hermes_rollouts import encode_record

from hermes_batch_runner.errors import BatchRunnerError, CorruptLogError


@attrs.frozen(slots=True)
class Recovery:
    """What :func:`recover_log` found: the ids present and how many torn bytes it removed."""

    ids: frozenset[str]
    lines: int
    dropped_bytes: int


def _line_id(raw: bytes, path: Path, lineno: int) -> str | None:
    """The record id of one complete line, or ``None`` if the line is not a valid record."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        raise CorruptLogError(f"{path}:{lineno}: a record must be a JSON object with a string id")
    record_id: str = record["id"]
    return record_id


def recover_log(path: Path) -> Recovery:
    """Read the ids of ``path`` and cut a torn or invalid last line off the file.

    An invalid line anywhere but at the end, or an id present twice, is corruption this module
    cannot have produced: it raises :class:`CorruptLogError` with the line number.
    """
    if not path.exists():
        return Recovery(frozenset(), 0, 0)
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1  # everything after the last newline is torn
    lines = data[:keep].split(b"\n")[:-1] if keep else []
    ids: set[str] = set()
    for index, raw in enumerate(lines):
        lineno = index + 1
        record_id = _line_id(raw, path, lineno)
        if record_id is None:
            if index == len(lines) - 1:
                keep -= len(raw) + 1
                lines = lines[:-1]
                break
            raise CorruptLogError(
                f"{path}:{lineno}: not valid JSON in the middle of the file; this is not a torn "
                "write, fix or remove the line by hand"
            )
        if record_id in ids:
            raise CorruptLogError(f"{path}:{lineno}: id {record_id!r} appears twice")
        ids.add(record_id)
    dropped = len(data) - keep
    if dropped:
        with open(path, "r+b") as handle:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    return Recovery(frozenset(ids), len(lines), dropped)


class JsonlLog:
    """Durable appends to one JSONL file; use as an async context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = anyio.Lock()

    async def __aenter__(self) -> JsonlLog:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def append(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` and return only once it is on disk.

        The write runs in a worker thread and is not abandoned on cancellation, so a record is
        either fully written or not written at all by this process.
        """
        line = encode_record(record)
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, line)

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            raise BatchRunnerError(f"{self.path} is not open")
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)


class RunLock:
    """An exclusive ``flock`` on the run directory: two runners never write the same run."""

    def __init__(self, root: Path) -> None:
        self._path = root / ".lock"
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BatchRunnerError(
                f"another batch runner is writing {self._path.parent}; wait for it or stop it"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record of a log, one at a time (a torn last line is skipped)."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict):
                yield record


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a log (a torn last line is ignored)."""
    return list(iter_records(path))
