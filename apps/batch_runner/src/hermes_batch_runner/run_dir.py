"""The run directory: ``runs/<timestamp>/`` with the files every run writes (their names:
:class:`hermes_protocols.formats.RunDirectory`)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from hermes_protocols.formats import RunDirectory

from hermes_batch_runner.errors import OutputDirError


def default_run_dir(base: Path, now: dt.datetime | None = None) -> Path:
    """``base/<UTC timestamp>``, made unique with a suffix if it already exists."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d-%H%M%S")
    candidate = base / stamp
    n = 1
    while candidate.exists():
        n += 1
        candidate = base / f"{stamp}-{n}"
    return candidate


def prepare_run_dir(root: Path, *, resume: bool) -> RunDirectory:
    """Create (or, when resuming, check) the run directory and prove it is writable."""
    paths = RunDirectory(root)
    if resume:
        if not paths.run.is_file():
            raise OutputDirError(
                f"cannot resume: {paths.run} does not exist; pass --output with the directory of "
                "the run to resume"
            )
    elif paths.run.exists():
        raise OutputDirError(
            f"{root} already holds a run; add --resume to continue it or choose another --output"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise OutputDirError(
            f"output directory {root} is not writable: {exc.strerror or exc}; choose another "
            "--output"
        ) from exc
    return paths


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temporary file, fsync and rename (never half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise OutputDirError(f"cannot read {path}: {exc}") from exc
