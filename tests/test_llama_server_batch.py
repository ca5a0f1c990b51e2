"""The batch runner in token mode against a real llama-server, on prompts that elicit non-ASCII
text: no rollout is lost to a character spelled in byte tokens, and every record names its
logprob mode and sampling parameters."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hermes_rollouts import TEMPERATURE

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROMPTS = [
    "Translate 'good morning' into Russian, Greek and Japanese.",
    "Write one sentence in Chinese about tea.",
    "List five emoji that describe the sea.",
    "Écris une phrase en français avec des accents.",
]


def test_token_mode_run_with_non_ascii_text_loses_no_rollout(
    llama_server: Any, tmp_path: Path
) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    out = tmp_path / "run"
    args = [
        *("--dataset", str(data), "--output", str(out), "--group-size", "1"),
        *("--server-type", "llama_cpp", "--model-url", llama_server.url),
        *("--tokenizer", str(llama_server.tokenizer_dir), "--sandbox", "local"),
        *("--max-turns", "1", "--max-tokens", "40", "--concurrency", "4", "--no-progress"),
    ]
    done = subprocess.run(
        [sys.executable, str(APP), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "failed.jsonl").read_text() == ""
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == len(PROMPTS)
    missing_total = 0
    for record in records:
        sampling = record["sampling"]
        assert sampling["logprob_mode"] == "sampled"
        assert sampling["logprob_mode_requested"] == "sampled"
        assert sampling["temperature"] == TEMPERATURE.value  # the default
        assert record["token_source"] == "sampler"
        assert record["logprob_mode"] == "sampled"
        masks, logprobs = record["masks"], record["logprobs"]
        nulls = [i for i, lp in enumerate(logprobs) if lp is None]
        assert nulls == sampling["missing_logprobs"]
        assert all(masks[i] == 1 for i in nulls)
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in logprobs if lp is not None)
        missing_total += len(nulls)
    text = "".join(r["messages"][-1]["content"] or "" for r in records)
    assert any(ord(ch) > 127 for ch in text), "the prompts elicited no non-ASCII text"
    assert missing_total > 0, "no character was spelled in byte tokens"
