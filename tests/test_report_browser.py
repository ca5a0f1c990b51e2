"""The report in a real browser: a real batch run (embedded SmolLM2, endless_terminals, bwrap)
writes report.html and tokenizer.json; headless Chromium renders the overview and one
rollout's token view, and what it shows must match the records."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hermes_report import write_report
from hermes_report.browser import dump_dom, find_chromium, url_of

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        find_chromium() is None, reason="no chromium on PATH (CI installs it: .ci/chromium.sh)"
    ),
]

INJECTION = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"


def _tokens_html(dom: str) -> str:
    start = dom.index('<div class="tokens">')
    return dom[start : dom.index("</div>", start)]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    args = ["--output", str(out), "--num-items", "1", "--group-size", "2", "--max-turns", "2"]
    done = subprocess.run(
        [sys.executable, str(APP), *args, "--max-tokens", "24", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_overview_counts_and_charts_match_the_run(real_run: Path) -> None:
    records = [json.loads(line) for line in (real_run / "trajectories.jsonl").open()]
    assert (real_run / "tokenizer.json").is_file()  # saved by the runner in token mode
    dom = dump_dom(url_of(real_run / "report.html"))
    assert re.search(r'data-rendered="[\d.]+"', dom)  # the explorer script ran to the end
    total = re.search(r'<td data-count="total">(\d+)</td>', dom)
    assert total is not None
    assert int(total.group(1)) == len(records) == 2
    trainable = re.search(r'<td data-count="trainable">(\d+)</td>', dom)
    assert trainable is not None
    assert int(trainable.group(1)) == sum(sum(r["masks"]) for r in records)
    reward = dom[dom.index('data-chart="reward"') :]
    assert "<svg" in reward.split("</figure>")[0]
    assert "<rect" in reward.split("</figure>")[0]
    rows = re.findall(r'<tr class="row (\w+)" data-index="(\d+)">', dom)
    assert rows == [("kept", "0"), ("kept", "1")]


def test_token_view_shows_exactly_the_trainable_tokens(real_run: Path) -> None:
    record = json.loads((real_run / "trajectories.jsonl").open().readline())
    dom = dump_dom(url_of(real_run / "report.html", "r=0"))
    tokens = _tokens_html(dom)
    spans = re.findall(r'<span class="tk (t|p)[^"]*"', tokens)
    assert len(spans) == len(record["tokens"])
    assert spans.count("t") == sum(record["masks"]) > 0
    summary = re.search(r'id="tok-summary" data-total="(\d+)" data-trainable="(\d+)"', dom)
    assert summary is not None
    assert (int(summary.group(1)), int(summary.group(2))) == (
        len(record["tokens"]),
        sum(record["masks"]),
    )
    assert "&lt;|im_start|&gt;" in tokens  # token text from the saved tokenizer.json
    assert tokens.count(" end") >= 1  # the turn's last sampled token is marked
    assert f"{record['drift']['mismatches']} drifted tokens" in dom  # the record's own count
    assert "Drift counts the tokens" in dom  # and what drift means, where it is shown
    assert "are a prefilled demonstration" in dom  # the demonstration is not the model's work


def test_hostile_model_text_renders_as_text(tmp_path: Path) -> None:
    record = {
        "id": INJECTION,
        "reward": 1.0,
        "messages": [{"role": "assistant", "content": INJECTION}],
        "tokens": [1, 2, 3],
        "masks": [0, 1, 1],
        "logprobs": [None, -0.1, -4.0],
        "token_source": "sampler",
    }
    page = write_report(
        [record],
        tmp_path / "r.html",
        title=INJECTION,
        token_text=lambda ids: [INJECTION] * len(ids),
    )
    dom = dump_dom(url_of(page, "r=0"))
    assert "<img" not in dom
    assert "<b>bold</b>" not in dom
    assert "<title>pwned</title>" not in dom  # the onerror handler never ran
    assert dom.count("&lt;img src=x onerror=") >= 4  # title, id, message, tokens: all as text


def test_phase_one_and_retokenized_records_say_what_they_are(tmp_path: Path) -> None:
    phase1 = {"id": "p1", "reward": 0.0, "messages": [{"role": "user", "content": "hi"}]}
    retok = {**phase1, "id": "rt", "tokens": [1, 2], "masks": [0, 1], "token_source": "retokenized"}
    page = write_report([phase1, retok], tmp_path / "r.html")
    first = dump_dom(url_of(page, "r=0"))
    assert "This rollout carries no sampler tokens" in first
    assert 'id="tok-summary"' not in first
    second = dump_dom(url_of(page, "r=1"))
    assert "re-tokenized from the messages" in second
    assert "no tokenizer: ids shown" in second
    assert "⟨2⟩" in _tokens_html(second)
