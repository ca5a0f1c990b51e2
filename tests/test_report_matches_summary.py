"""The report of a real run tells the same story as its ``summary.json`` and its records: the
batch runner's default run (embedded SmolLM2, a prefilled ``terminal`` demonstration, bwrap),
then every count the report shows compared with the summary's and the records' own."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _counts(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-count="([a-z_]+)">([^<]*)<', page))


def _chart(page: str, name: str) -> dict[str, str]:
    """A bar chart's ``label: value text`` pairs (its bars' tooltips)."""
    figure = re.search(rf'data-chart="{name}">(.*?)</figure>', page)
    assert figure is not None, name
    return {
        html.unescape(label): html.unescape(text)
        for label, text in re.findall(r"<title>([^<]*): ([^<]*)</title>", figure.group(1))
    }


def _rows(page: str) -> list[dict[str, Any]]:
    blob = re.search(r'<script type="application/json" id="rows">(.*?)</script>', page)
    assert blob is not None
    rows: list[dict[str, Any]] = json.loads(blob.group(1))
    return rows


@pytest.mark.timeout(1200)
def test_the_default_runs_report_agrees_with_its_summary_and_records(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(APP), "--output", str(run), "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "summary.json").read_text())
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    page = (run / "report.html").read_text()
    assert all(r["prefill_messages"] > 0 for r in records)  # demonstrations with tool calls

    tools = summary["tool_errors"]
    per_tool = _chart(page, "tools")
    calls = failed = 0
    for text in per_tool.values():
        found = re.fullmatch(r"(\d+) calls, (\d+) failed", text)
        assert found is not None, text
        calls, failed = calls + int(found.group(1)), failed + int(found.group(2))
    assert (calls, failed) == (tools["tool_calls"], tools["total"])
    stops = {label: int(text) for label, text in _chart(page, "stop").items()}
    assert stops == summary["counts"]["stop_reasons"]

    counts = _counts(page)
    assert int(counts["total"]) == summary["counts"]["finished"]
    for status in ("kept", "failed", "filtered"):
        assert int(counts[status]) == summary["counts"][status]
    assert int(counts["tool_calls"]) == tools["tool_calls"]
    assert int(counts["tool_failures"]) == tools["total"]
    assert int(counts["trainable"]) == summary["tokens"]["generated"]
    reward = summary["reward"]
    assert counts["mean"] == f"{reward['mean']:.3f}"
    assert counts["pass"].endswith(
        f"({round(reward['pass_rate'] * reward['count'])}/{reward['count']})"
    )

    by_id = {r["id"]: r for r in records}
    for row in _rows(page):
        record = by_id[row["id"]]
        stats = record["tool_stats"].values()
        assert row["tc"] == sum(s["calls"] for s in stats)
        assert row["te"] == sum(s["failures"] for s in stats) == len(record["tool_errors"])
        assert row["drift"] == record["drift"]["mismatches"]
        assert row["gen"] == sum(m == 1 for m in record["masks"])
