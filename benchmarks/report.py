"""Write one benchmark's results into its own section of docs/benchmarks.md.

Each section records the machine, the date and the command, so numbers stay attributable.
Sections are delimited by ``<!-- bench:NAME -->`` markers and replaced in place on re-runs.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Run with `uv run nox -s bench` (or `uv run nox -s bench -- NAME` for one). Every benchmark compares
against a baseline measured in the same run and reports medians and ratios: these machines are
noisy, so absolute numbers matter less than the ratios.
"""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores, {cpu}, "
        f"Python {platform.python_version()}"
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def write_section(name: str, title: str, command: str, body: str) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md."""
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\n"
        f"Machine: {machine()}. Date: {today}. Command: `{command}`.\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->\n"
    )
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else HEADER
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(section)
