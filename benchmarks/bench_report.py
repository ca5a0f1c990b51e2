"""hermes-report: how fast a 1,000-rollout report opens in headless Chromium.

1,000 synthetic rollouts shaped like token-mode batch-runner records (3-6 turns, tool calls and
results, ~1,500 tokens each of which a few hundred trainable, logprobs, some drift, failures
and filtered ones) are rendered with the embedded SmolLM2 tokenizer's token text (the
vocabulary slice the page embeds is then nearly the whole vocabulary, the worst case).

Each repetition, interleaved, starts a fresh headless Chromium (``--dump-dom``) on:

- a blank page (the baseline: browser start-up and teardown);
- the report (overview + first page of the list);
- the report opened on one rollout's page (``#r=500``: messages and the token view).

Reported: the page's own load-to-rendered time (``performance.now()`` when the explorer script
has finished, counted from navigation start), the wall time of each browser run and its excess
over the blank page; medians over the repetitions. Also the file size and the Python render
time.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_loop.embedded.hf_export import default_cache_dir, export_hf_tokenizer
from hermes_loop.embedded.model_file import default_model_path
from hermes_report import TokenTexts, write_report
from hermes_report.browser import dump_dom, find_chromium, screenshot, url_of

from benchmarks.report import median, write_section

ROLLOUTS, REPS = 1000, 5
COMMAND = "uv run --frozen --no-sync python -m benchmarks report"
FAMILIES = ("sort_unique", "count_matches", "replace_in_place", "csv_column", "json_field")
STOPS = ("final_answer", "max_turns", "truncated", "context_exhausted")


def _message_text(rng: random.Random, words: int) -> str:
    vocab = ("the", "file", "ls", "grep", "-n", "sort", "|", "wc", "output", "done", "\n")
    return " ".join(rng.choice(vocab) for _ in range(words))


def synthetic_record(n: int, rng: random.Random, vocab_size: int) -> dict[str, Any]:
    """One token-mode record of realistic shape and size."""
    turns = rng.randint(3, 6)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _message_text(rng, 60)},
        {"role": "user", "content": _message_text(rng, 40)},
    ]
    ids, masks, logprobs = [], [], []

    def extend(count: int, trainable: bool) -> None:
        for _ in range(count):
            ids.append(rng.randrange(vocab_size))
            masks.append(int(trainable))
            logprobs.append(-rng.expovariate(1.5) if trainable else 0.0)

    extend(420, trainable=False)
    for turn in range(turns):
        call = {"command": _message_text(rng, 6)}
        messages.append(
            {
                "role": "assistant",
                "content": _message_text(rng, 20),
                "tool_calls": [
                    {
                        "id": f"call_{turn}",
                        "type": "function",
                        "function": {"name": "terminal", "arguments": str(call)},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": _message_text(rng, 80)}
        )
        extend(rng.randint(40, 90), trainable=True)
        extend(rng.randint(80, 200), trainable=False)
    failed = n % 50 == 7
    record: dict[str, Any] = {
        "id": f"endless_terminals/item{n // 4}/{n % 4}",
        "env": "endless_terminals",
        "item": {"id": f"item{n // 4}", "data": {"family": FAMILIES[n % 5], "difficulty": n % 3}},
        "reward": None if failed else float(rng.random() < 0.3),
        "stop_reason": rng.choice(STOPS),
        "turns": turns,
        "messages": messages,
        "tool_errors": (
            [
                {
                    "kind": "invalid_arguments",
                    "tool": "terminal",
                    "turn": 1,
                    "arguments": "{",
                    "message": "bad JSON",
                }
            ]
            if n % 9 == 0
            else []
        ),
        "tokens": ids,
        "masks": masks,
        "logprobs": logprobs,
        "token_source": "sampler",
        "drift": {"mismatches": 1 if n % 20 == 0 else 0, "positions": [430] if n % 20 == 0 else []},
        "finished_at": 1_700_000_000.0 + n * 0.8,
        "metadata": {"toolsets": ["terminal"]},
    }
    if failed:
        record["failure"] = {"kind": "infrastructure", "phase": "setup", "message": "x"}
    elif n % 25 == 3:
        record["filter_reason"] = "min_reward"
    return record


def _rendered_ms(dom: str) -> float:
    found = re.search(r'data-rendered="([\d.]+)"', dom)
    if found is None:
        raise RuntimeError("the report did not finish rendering (no data-rendered attribute)")
    return float(found.group(1))


def _shot(url: str, target: Path) -> float:
    """Wall time of a fresh browser that loads ``url``, paints it and saves a screenshot."""
    start = time.perf_counter()
    screenshot(url, target, size=(1280, 1000), timeout_s=120)
    return time.perf_counter() - start


def main() -> None:
    if find_chromium() is None:
        print("bench_report: skipped, no chromium on PATH (.ci/chromium.sh installs it)")
        return
    texts = TokenTexts.from_file(
        export_hf_tokenizer(default_model_path(), default_cache_dir()) / "tokenizer.json"
    )
    vocab_size = texts.tokenizer.get_vocab_size()
    rng = random.Random(0)
    records = [synthetic_record(n, rng, vocab_size) for n in range(ROLLOUTS)]
    trainable = sum(sum(r["masks"]) for r in records)
    tokens = sum(len(r["tokens"]) for r in records)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        page = Path(tmp) / "report.html"
        blank = Path(tmp) / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        start = time.perf_counter()
        write_report(records, page, token_text=texts, special_ids=texts.special_ids)
        render_s = time.perf_counter() - start
        size = page.stat().st_size
        shot = Path(tmp) / "shot.png"
        blank_s, open_s, one_s, open_ms, one_ms = [], [], [], [], []
        for _ in range(REPS):
            blank_s.append(_shot(url_of(blank), shot))
            open_s.append(_shot(url_of(page), shot))
            one_s.append(_shot(url_of(page, "r=500"), shot))
            open_ms.append(_rendered_ms(dump_dom(url_of(page), timeout_s=120)))
            dom = dump_dom(url_of(page, "r=500"), timeout_s=120)
            one_ms.append(_rendered_ms(dom))
            if 'id="tok-summary"' not in dom:
                raise RuntimeError("rollout 500's token view did not render")
    base = median(blank_s)
    rows = "\n".join(
        f"| {name} | **{median(ms) / 1000:.2f} s** | {median(wall):.2f} s | "
        f"{median(wall) - base:+.2f} s |"
        for name, ms, wall in (
            ("report: overview + first list page", open_ms, open_s),
            ("report opened on one rollout (`#r=500`, token view)", one_ms, one_s),
        )
    )
    body = f"""
{ROLLOUTS} rollouts ({tokens:,} tokens, {trainable:,} trainable, {len(texts.special_ids)} special
ids; token text from the SmolLM2 tokenizer), rendered by `write_report` in {render_s:.2f} s
into one file of **{size / 1e6:.1f} MB**. Headless Chromium, a fresh profile per run, {REPS}
interleaved repetitions, medians:

| page | load-to-rendered (page clock) | screenshot wall time | excess over blank page |
|---|---|---|---|
| blank page (baseline) | — | {base:.2f} s | — |
{rows}

Load-to-rendered is `performance.now()` written by the page when its explorer script has
finished (navigation start = 0): reading and parsing the file, the overview's SVG, the list's
JSON and the first page of rows (or one rollout's messages and token spans); it is read back
with `--dump-dom`. The wall time is a fresh `chromium --headless --screenshot` run (start,
load, paint, capture, exit), the same for the blank page; the excess is what the report costs
over an empty page. Target: under 2 s.
"""
    write_section("report", "hermes-report: opening a 1,000-rollout report", COMMAND, body)
