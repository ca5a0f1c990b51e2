"""The batch runner for real: the embedded SmolLM2 model, endless_terminals, bwrap sandboxes.

One small run (one item, short turns) checks every output file and the documented fields of
``trajectories.jsonl``; a second invocation resumes it and does nothing more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DOCUMENTED = {
    "id", "env", "item", "messages", "conversations", "reward", "metrics", "stop_reason",
    "tool_errors", "turns", "timings", "model", "tokens", "masks", "logprobs",
}  # fmt: skip
SMALL = ["--num-items", "1", "--max-turns", "2", "--max-tokens", "24", "--no-progress"]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


def test_a_small_real_run_writes_every_documented_output(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _run("--output", str(out), *SMALL, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1/1 rollouts" in done.stderr

    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert (out / "failed.jsonl").read_text() == ""
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert set(record) >= DOCUMENTED
    assert record["env"] == "endless_terminals"
    assert record["id"] == f"endless_terminals/{record['item']['id']}/0"
    assert record["model"] == "embedded:SmolLM2-135M-Instruct.Q8_0.gguf"
    assert record["messages"][0]["role"] == "system"
    assert record["messages"][-1]["role"] in ("assistant", "tool")
    if record["conversations"] is None:  # a tool call cut by the token limit: not JSON
        assert "arguments are not valid JSON" in record["conversations_error"]
    else:
        assert [c["from"] for c in record["conversations"][:2]] == ["system", "human"]
        assert record["conversations"][0]["value"] == record["system_prompt"]
    assert [t["function"]["name"] for t in record["tools"]] == ["terminal"]
    assert "<tools>" in record["system_prompt"]
    assert record["toolsets_used"] == ["terminal"]
    assert record["prefill_messages"] > 0  # the terminal demonstration
    assert set(record["tool_stats"]) <= {"terminal", "invalid_tool_call"}
    assert isinstance(record["reward"], float)
    assert 1 <= record["turns"] <= 2
    tokens, masks, logprobs = record["tokens"], record["masks"], record["logprobs"]
    assert len(tokens) == len(masks) == len(logprobs)
    assert record["token_source"] == "sampler"
    generated = [lp for lp, m in zip(logprobs, masks, strict=True) if m == 1]
    assert 0 < len(generated) <= 2 * 24
    assert all(lp <= 0.0 for lp in generated)
    assert all(lp == 0.0 for lp, m in zip(logprobs, masks, strict=True) if m == 0)
    assert record["timings"]["agent_s"] > 0

    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["counts"]["kept"] == 1
    assert summary["tokens"]["generated"] == len(generated)
    assert summary["session"]["tokens_per_s"] > 0
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["sandbox"] == "bwrap"
    assert run["config"]["server_type"] == "embedded"
    assert run["expected"] == 1
    report = (out / "report.html").read_text()
    assert record["id"] in report

    again = _run("--output", str(out), "--resume", "--no-progress", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "all 1 rollouts already done" in again.stderr
    assert (out / "trajectories.jsonl").read_text().splitlines() == lines
