"""hermes-parsers: parse throughput against atroposlib's parser, and streaming cost.

1. Hermes-format outputs (content + one ``<tool_call>``) parsed by ``get_parser("hermes")`` and
   by ``atroposlib.utils.tool_call_parser.parse_tool_call`` on the same inputs.
2. A ~1 MB Hermes output (reasoning, content, 50 calls with long unicode arguments) fed to the
   incremental parser in 4-character chunks, against one ``parse`` of the whole text.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from functools import partial

from hermes_parsers import get_parser
from hermes_protocols.parsing import ParsedToolCall

from benchmarks.report import median, write_section

REPEATS = 7
# CPU time of this process: other workloads on the shared machine slow wall-clock timings of
# whichever contender they happen to overlap; every contender here is single-threaded.
_clock = time.process_time
_WORDS = ["alpha", "beta", "é", "中文", 'x"y', "path\\to", "<tag>", "{", "}", "\n", "42", "😀"]


def _blob(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(_WORDS)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)


def _outputs(rng: random.Random, count: int, arg_chars: int) -> list[str]:
    """Hermes/Qwen3-style outputs: reasoning, a sentence of content, one tool call whose
    longest argument has about ``arg_chars`` characters."""
    parser = get_parser("hermes")
    texts = []
    for i in range(count):
        args = {"path": f"src/mod_{i}.py", "content": _blob(rng, arg_chars), "overwrite": True}
        call = ParsedToolCall(f"tool_{i % 7}", args, "")
        texts.append(
            parser.render(
                content=_blob(rng, rng.randint(20, 200)),
                reasoning=_blob(rng, rng.randint(100, 600)),
                tool_calls=[call],
            )
        )
    return texts


def _interleaved(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Time every contender once per round, ``repeats`` rounds: load changes on a shared
    machine then hit all contenders alike, and round ``i`` of each can be compared."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(run())
    return times


def _paired(times: dict[str, list[float]], slow: str, fast: str) -> float:
    """Median over rounds of ``slow`` time / ``fast`` time."""
    return median([a / b for a, b in zip(times[slow], times[fast], strict=True)])


def _each(fn: Callable[[str], object], texts: list[str]) -> float:
    start = _clock()
    for text in texts:
        fn(text)
    return _clock() - start


def _json_only(text: str) -> object:
    return json.loads(text[text.find("<tool_call>") + 11 : text.find("</tool_call>")])


def _throughput() -> tuple[str, float]:
    from atroposlib.utils.tool_call_parser import parse_tool_call  # type: ignore[import-untyped]

    # atroposlib logs every parse at WARNING; silence it so the baseline measures parsing.
    logging.getLogger("atroposlib.utils.tool_call_parser").setLevel(logging.CRITICAL)
    parser = get_parser("hermes")
    rows = []
    totals = [0.0, 0.0]
    ceilings = []
    for arg_chars in (100, 1_000, 4_000, 16_000):
        texts = _outputs(random.Random(arg_chars), max(50, 400_000 // (arg_chars + 800)), arg_chars)
        for text in texts:  # same inputs, same answers
            ours = parser.parse(text).tool_calls[0]
            theirs = parse_tool_call(text)
            assert (ours.name, ours.arguments) == theirs[:2], theirs
        size_mb = sum(len(t.encode()) for t in texts) / 1e6
        times = _interleaved(
            {
                "ours": partial(_each, parser.parse, texts),
                "atropos": partial(_each, parse_tool_call, texts),
                # Reference: find the tags and ``json.loads`` the call, nothing else.
                "reference": partial(_each, _json_only, texts),
            },
            REPEATS,
        )
        h, a, j = (median(times[k]) for k in ("ours", "atropos", "reference"))
        totals[0] += h
        totals[1] += a
        ceilings.append(_paired(times, "atropos", "reference"))
        rows.append(
            f"| ~{arg_chars:,} | {len(texts)} | {size_mb:.2f} MB | {size_mb / h:.1f} MB/s | "
            f"{size_mb / a:.1f} MB/s | **{_paired(times, 'atropos', 'ours'):.2f}x** | "
            f"{size_mb / j:.1f} MB/s | {ceilings[-1]:.2f}x |"
        )
    overall = totals[1] / totals[0]
    body = (
        "Hermes/Qwen3-style outputs (reasoning, content, one `<tool_call>` whose arguments "
        "hold unicode, quotes and backslashes), grouped by the size of the longest argument; "
        f"process CPU time, {REPEATS} interleaved rounds per group (throughput: median; "
        "ratios: median of the per-round ratios), both parsers on the same texts (answers "
        "checked equal on every text). The last two columns are a reference: two `str.find` "
        "calls and one `json.loads` of the sliced-out call, nothing else (no reasoning/content "
        "split, no validation, no result objects); *ceiling* is atroposlib's time over it, "
        "about the best speedup a parser that must decode the arguments can show (ours can "
        "edge past it on big calls because it scans the JSON in place instead of slicing it "
        "out first).\n\n"
        "| argument size (chars) | outputs | bytes | hermes_parsers | atroposlib "
        "`parse_tool_call` | speedup | reference: find + `json.loads` | ceiling |\n"
        "|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n**Overall (sum of the groups' median times): {overall:.2f}x** (target >= 3x). "
        "`parse` takes a fast path for the exact layout templates write (C string searches, "
        "one JSON scan for the name and one for the arguments, the arguments' source text "
        "sliced once, falling back to the general state machine for anything else). "
        "atroposlib spends its extra time in a lazy `.*?` regex over the output, a quote "
        "replacement, and a `repr` of the arguments for a log line (evaluated even though its "
        "logger is set to CRITICAL here, so the log I/O itself does not count). For ~100-char "
        f"calls the ceiling itself is {ceilings[0]:.1f}x: decoding the call is most of "
        "atroposlib's cost too, so >= 3x is out of reach there for a parser that must decode "
        "the arguments; the gap grows with argument size. Timings on this shared 2-core "
        "machine move by tens of percent between runs.\n"
    )
    return body, overall


def _big_output(scale: float) -> str:
    rng = random.Random(1)
    calls = [
        ParsedToolCall(f"tool_{i}", {"text": _blob(rng, 10_000), "n": i, "k": [_blob(rng, 50)]}, "")
        for i in range(int(50 * scale))
    ]
    return get_parser("hermes").render(
        content=_blob(rng, int(200_000 * scale)),
        reasoning=_blob(rng, int(300_000 * scale)),
        tool_calls=calls,
    )


def _streaming() -> tuple[str, float]:
    parser = get_parser("hermes")

    def incremental(text: str, chunks: list[str], batch: int) -> float:
        stream = get_parser("hermes", stream_batch=batch).stream()
        start = _clock()
        for chunk in chunks:
            stream.feed(chunk)
        turn = stream.finish()[1]
        elapsed = _clock() - start
        assert turn == parser.parse(text)
        return elapsed

    def collect_then_parse(text: str, chunks: list[str]) -> float:
        start = _clock()
        received: list[str] = []
        for chunk in chunks:
            received.append(chunk)
        turn = parser.parse("".join(received))
        elapsed = _clock() - start
        assert turn == parser.parse(text)
        return elapsed

    def python_call_floor(chunks: list[str]) -> float:
        def feed(chunk: str) -> list[object]:  # a Python function that does nothing
            return []

        start = _clock()
        for chunk in chunks:
            feed(chunk)
        return _clock() - start

    rows = []
    ratio = 0.0
    for scale in (0.25, 0.5, 1.0):
        text = _big_output(scale)
        chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
        mb = len(text.encode()) / 1e6
        times = _interleaved(
            {
                "one_shot": partial(_each, parser.parse, [text]),
                "collected": partial(collect_then_parse, text, chunks),
                "floor": partial(python_call_floor, chunks),
                "batched": partial(incremental, text, chunks, 256),
            },
            REPEATS,
        )
        one_shot, collected, floor, batched = (
            median(times[k]) for k in ("one_shot", "collected", "floor", "batched")
        )
        eager = median([incremental(text, chunks, 1) for _ in range(2)])
        ratio = _paired(times, "batched", "one_shot")

        def ms(seconds: float) -> str:
            return f"{seconds * 1e3:.0f} ms"

        rows.append(
            f"| {mb:.2f} MB | {len(chunks):,} | {ms(one_shot)} | {ms(collected)} | {ms(floor)} "
            f"| {ms(batched)} ({batched / mb * 1e3:.0f} ms/MB) | **{ratio:.1f}x** | "
            f"{_paired(times, 'batched', 'collected'):.1f}x | "
            f"{_paired(times, 'batched', 'floor'):.1f}x | {ms(eager)} "
            f"({eager / mb * 1e3:.0f} ms/MB) |"
        )
    body = (
        "One Hermes output (reasoning, content, calls with 10 kB arguments) at three sizes, fed "
        "in 4-character chunks; every streamed result is checked equal to `parse` of the "
        "same text. Baselines measured in the same run: one-shot `parse(text)`; "
        "*collect + parse*, a consumer that receives the same chunks, appends each to a "
        "list, joins and parses once; and the *Python call floor*, the same loop calling a "
        "Python function that does nothing and returns `[]`. `stream_batch` is how many "
        "characters a stream queues before it examines them (default 256; 1 = events after "
        f"every chunk). Process CPU time, {REPEATS} interleaved rounds: times are medians, "
        "ratios medians of the per-round ratios (batch 1: median of 2 runs).\n\n"
        "| output | chunks | one-shot `parse` | collect + parse | Python call floor | "
        "stream, batch 256 | vs one-shot | vs collect + parse | vs call floor | "
        "stream, batch 1 |\n|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n**Ratio at 1 MB vs one-shot `parse`: {ratio:.1f}x (target < 3x: missed).** "
        "Cost per MB is flat across sizes (linear: no chunk re-scans the text). The target "
        "cannot be met by a `feed` written in Python with 4-character chunks: one-shot "
        "parsing of 1 MB is a few C string searches plus `json`, while a quarter-million "
        "calls of even an empty Python function (the call-floor column) already cost several "
        "times that. `feed` queues the chunk in a list, subtracts its length and returns a "
        "fresh empty list until `stream_batch` characters are waiting (never a shared list a "
        "caller could mutate); the gap to the call floor is that work, the state machine "
        "running once per batch, and its pass over each call body (which decodes the same "
        "JSON the one-shot parse does). Per-instance closures instead of a method measured "
        "no faster in CPU-time A/B runs, so `feed` stays a plain method.\n"
    )
    return body, ratio


def main() -> None:
    throughput, speedup = _throughput()
    streaming, ratio = _streaming()
    write_section(
        "parsers",
        "hermes-parsers: parse throughput and streaming cost",
        "uv run --frozen --no-sync python -m benchmarks parsers",
        "### Parse throughput vs atroposlib\n\n"
        + throughput
        + "\n### Incremental parsing\n\n"
        + streaming,
    )
    print(f"speedup {speedup:.2f}x, streaming ratio {ratio:.2f}x")
