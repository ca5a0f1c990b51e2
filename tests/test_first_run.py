"""The README's main command, run the way a newcomer runs it: a clean clone of this commit under
a directory nobody else may enter (as root: /root is mode 700), then the command exactly as the
README writes it. A crash (e.g. a llama.cpp build that dies on this CPU), a sandbox that cannot
start, or an agent that never acts turns this red.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def readme_main_command() -> str:
    """The first line of the README's first ``bash`` block, without its comment."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None, "README.md has no ```bash block"
    line = block.group(1).splitlines()[0]
    return line.split("#", 1)[0].strip()


def test_readme_names_the_batch_runner_as_its_main_command() -> None:
    command = readme_main_command()
    assert command.endswith("uv run apps/batch_runner")
    assert "uv sync" in command


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.timeout(2400)
def test_clean_clone_runs_the_readme_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    clone = home / "hermes-rl"
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)

    done = subprocess.run(
        ["bash", "-c", readme_main_command() + " --no-progress"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (run,) = (clone / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True, summary
    counts = summary["counts"]
    assert counts["failed"] == 0, counts
    assert counts["kept"] + counts["filtered"] == counts["expected"] > 0
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == counts["kept"]
    executed = [
        message
        for record in records
        for message in record["messages"][record["metadata"]["workspace"]["prefill_messages"] + 1 :]
        if message["role"] == "tool" and '"exit_code"' in (message["content"] or "")
    ]
    assert executed, "no rollout of the default run executed a tool call in its sandbox"
    assert summary["tool_errors"]["tool_calls"] >= len(executed)
    assert f"tool calls {summary['tool_errors']['tool_calls']}" in done.stderr
    assert (run / "report.html").is_file()
