"""An environment plugin whose setup metadata holds bytes, through the real batch runner: the
record boundary refuses the value with one line naming the environment and the key (no
traceback, nothing half-written), whatever the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BYTES_ENV = '''
from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv


class BytesEnv(EndlessTerminalsEnv):
    """endless_terminals whose setup metadata holds the task file's bytes."""

    name = "bytes_env"

    def __init__(self) -> None:
        super().__init__(EndlessTerminalsConfig(families=("write_word",)))

    async def setup_workspace(self, item, slot):
        await super().setup_workspace(item, slot)
        return {"blob": b"\\x00 not text"}
'''


@pytest.mark.timeout(1200)
def test_bytes_in_setup_metadata_stop_the_run_with_one_line(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "bytes_env.py"
    plugin.parent.mkdir()
    plugin.write_text(BYTES_ENV)
    run = tmp_path / "run"
    cmd = [
        sys.executable, str(ROOT / "apps" / "batch_runner"), "--env", f"{plugin}:BytesEnv",
        "--num-items", "1", "--max-turns", "1", "--max-tokens", "8",
        "--prefill-messages", "none", "--output", str(run), "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1100, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: RecordError: environment 'bytes_env' returned a value records cannot hold, "
        "record.metadata.workspace.blob: bytes: return plain JSON (str, numbers, bool, None, "
        "lists, dicts with str keys) from items, setup_workspace and verify, e.g. text or "
        "base64 instead of bytes"
    ], done.stderr[-3000:]
    assert (run / "trajectories.jsonl").read_bytes() == b""
    assert (run / "failed.jsonl").read_bytes() == b""
