"""hermes-parsers: parse throughput against atroposlib's parser, and streaming cost.

1. Hermes-format outputs (content + one ``<tool_call>``) parsed by ``get_parser("hermes")`` and
   by ``atroposlib.utils.tool_call_parser.parse_tool_call`` on the same inputs.
2. A ~1 MB Hermes output (reasoning, content, 50 calls with long unicode arguments) fed to the
   incremental parser in 4-character chunks, against one ``parse`` of the whole text.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from hermes_parsers import get_parser
from hermes_protocols.parsing import ParsedToolCall

from benchmarks.report import median, write_section

REPEATS = 5
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


def _timed(fn: Callable[..., object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _throughput() -> tuple[str, float]:
    from atroposlib.utils.tool_call_parser import parse_tool_call  # type: ignore[import-untyped]

    # atroposlib logs every parse at WARNING; silence it so the baseline measures parsing.
    logging.getLogger("atroposlib.utils.tool_call_parser").setLevel(logging.CRITICAL)
    parser = get_parser("hermes")
    rows = []
    totals = [0.0, 0.0]
    for arg_chars in (100, 1_000, 4_000, 16_000):
        texts = _outputs(random.Random(arg_chars), max(50, 400_000 // (arg_chars + 800)), arg_chars)
        for text in texts[:20]:  # same inputs, same answers
            ours = parser.parse(text).tool_calls[0]
            theirs = parse_tool_call(text)
            assert (ours.name, ours.arguments) == theirs[:2], theirs
        size_mb = sum(len(t.encode()) for t in texts) / 1e6
        h = median([_timed(lambda t=texts: [parser.parse(x) for x in t]) for _ in range(REPEATS)])
        a = median(
            [_timed(lambda t=texts: [parse_tool_call(x) for x in t]) for _ in range(REPEATS)]
        )
        totals[0] += h
        totals[1] += a
        rows.append(
            f"| ~{arg_chars:,} | {len(texts)} | {size_mb:.2f} MB | {size_mb / h:.1f} MB/s | "
            f"{size_mb / a:.1f} MB/s | {a / h:.2f}x |"
        )
    overall = totals[1] / totals[0]
    body = (
        "Hermes/Qwen3-style outputs (reasoning, content, one `<tool_call>` whose arguments "
        "hold unicode, quotes and backslashes), grouped by the size of the longest argument; "
        f"median of {REPEATS} runs per group, both parsers on the same texts (answers checked "
        "equal).\n\n"
        "| argument size (chars) | outputs | bytes | hermes_parsers | atroposlib "
        "`parse_tool_call` | speedup |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n**Overall (all groups, equal bytes per group): {overall:.2f}x.** "
        "Both parsers spend most of their time in `json` decoding the arguments; ours adds "
        "a few C string searches, theirs a lazy regex over the call and a `repr` of the "
        "arguments for a log line (its logger was set to CRITICAL so the log I/O itself does "
        "not count against it). Short calls are dominated by fixed per-call costs on both "
        "sides, so the >= 3x target is not met there; per-group ratios move a lot between runs "
        "on this shared 2-core machine.\n"
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
        start = time.perf_counter()
        for chunk in chunks:
            stream.feed(chunk)
        turn = stream.finish()[1]
        elapsed = time.perf_counter() - start
        assert turn == parser.parse(text)
        return elapsed

    rows = []
    ratio = 0.0
    for scale in (0.25, 0.5, 1.0):
        text = _big_output(scale)
        chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
        mb = len(text.encode()) / 1e6
        one_shot = median([_timed(lambda t=text: parser.parse(t)) for _ in range(REPEATS)])
        batched = median([incremental(text, chunks, 256) for _ in range(3)])
        eager = median([incremental(text, chunks, 1) for _ in range(2)])
        ratio = batched / one_shot
        rows.append(
            f"| {mb:.2f} MB | {len(chunks):,} | {one_shot * 1e3:.0f} ms | "
            f"{batched * 1e3:.0f} ms ({batched / mb * 1e3:.0f} ms/MB) | {ratio:.2f}x | "
            f"{eager * 1e3:.0f} ms ({eager / mb * 1e3:.0f} ms/MB) | {eager / one_shot:.1f}x |"
        )
    body = (
        "One Hermes output (reasoning, content, calls with 10 kB arguments) at three sizes, fed "
        "in 4-character chunks; every streamed result is checked equal to `parse`. "
        "`stream_batch` is how many characters a stream queues before it examines them "
        "(default 256; 1 = events after every chunk).\n\n"
        "| output | chunks | one-shot `parse` | stream, batch 256 | vs one-shot | "
        "stream, batch 1 | vs one-shot |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\n**Ratio at 1 MB, default batch: {ratio:.2f}x** (target < 3x). The cost per "
        "MB stays flat as the output grows (linear: no chunk re-scans the text). What remains "
        "above 1x is CPython's cost of a quarter-million `feed` calls against a one-shot path "
        "that spends its time in C string search and `json`; with `stream_batch=1` the machine "
        "also runs once per 4 characters.\n"
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
