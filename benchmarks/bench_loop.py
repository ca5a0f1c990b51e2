"""hermes-loop benchmarks: agent-loop overhead and per-turn token bookkeeping.

1. Loop overhead: 1,000 concurrent rollouts x 20 turns on one event loop, against a zero-latency
   in-process backend and a no-op tool. Baseline: a bare hand-written loop (call the backend,
   call the tool, append messages) with none of the framework's work (validation, limits,
   stats, token ledger). Reported per turn, medians of repeated runs.
2. Token bookkeeping per turn at 10/50/100 turns: the bridge (render only the new messages
   after a fixed prefix, tokenize that) against re-rendering and re-tokenizing the whole
   history every turn (atroposlib ManagedServer's approach), same template and tokenizer.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from hermes_loop import (
    AgentLoop,
    ChatModel,
    HFTokenizer,
    LoopLimits,
    TemplateBridge,
    TokenModel,
)
from hermes_protocols import (
    ChatChoice,
    ChatResult,
    Generation,
    JSONObject,
    Message,
    ParsedToolCall,
    ParsedTurn,
    SamplingParams,
    ToolCall,
    ToolResult,
    ToolSchema,
    Usage,
)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from benchmarks.report import write_section

ROLLOUTS = 1000
TURNS = 20
REPEATS = 3
TOOL = ToolSchema(
    name="noop",
    description="Does nothing",
    parameters={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
)
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CALL_TEXT = '<tool_call>\n{"name": "noop", "arguments": {"x": 1}}\n</tool_call>'
RESULT_TEXT = "exit code 0; stdout: " + "ok " * 60


class ZeroLatencyChat:
    """Answers every request instantly: a tool call until the last turn, then a final answer."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        call = Message.assistant(None, (ToolCall("c", "noop", '{"x": 1}'),))
        self._call = ChatResult([ChatChoice(call, "tool_calls")], Usage(10, 5))
        self._final = ChatResult([ChatChoice(Message.assistant("done"), "stop")], Usage(10, 5))

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        sampling: SamplingParams,
        n: int = 1,
        extra_body: JSONObject | None = None,
    ) -> ChatResult:
        assistant_turns = (len(messages) - 1) // 2
        return self._final if assistant_turns + 1 >= self.turns else self._call


class ZeroLatencyTokens:
    """Answers instantly: the call ids until the prompt reaches ``final_at`` tokens (the length
    of the last turn's prompt, measured once), then the final answer ids."""

    def __init__(self, call_ids: list[int], final_ids: list[int]) -> None:
        self._call = Generation(call_ids, [-0.1] * len(call_ids), "stop")
        self._final = Generation(final_ids, [-0.1] * len(final_ids), "stop")
        self.final_at: int | None = None
        self.lengths: list[int] = []

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        if self.final_at is None:
            self.lengths.append(len(prompt_ids))
            return self._call
        return self._final if len(prompt_ids) >= self.final_at else self._call


class FixedParser:
    """A parser that recognises the one fixed call text (parsing cost is not the loop's)."""

    name = "fixed"

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        if "<tool_call>" in text:
            return ParsedTurn(None, tool_calls=[ParsedToolCall("noop", {"x": 1}, '{"x": 1}')])
        return ParsedTurn(text)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        return content or ""

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> Any:
        raise NotImplementedError


async def noop_tool(name: str, arguments: Mapping[str, Any]) -> ToolResult:
    return ToolResult(content="ok")


async def _bare_rollout(backend: ZeroLatencyChat, turns: int) -> int:
    messages = [Message.user("go")]
    sampling = SamplingParams()
    for _ in range(turns):
        result = await backend.chat(messages, tools=[TOOL], sampling=sampling)
        message = result.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            out = await noop_tool(call.name, json.loads(call.arguments))
            messages.append(Message.tool(out.content, call.id, call.name))
    return len(messages)


async def _many(rollout: Any, count: int) -> tuple[float, float]:
    """Run ``count`` rollouts concurrently; return (wall seconds, process CPU seconds)."""
    started, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(rollout)
    return time.perf_counter() - started, time.process_time() - cpu


async def overhead(tokenizer: HFTokenizer) -> dict[str, list[tuple[float, float]]]:
    chat_backend = ZeroLatencyChat(TURNS)
    chat_loop = AgentLoop(ChatModel(chat_backend), limits=LoopLimits(max_turns=TURNS))
    eos = tokenizer.eos_token_id
    token_backend = ZeroLatencyTokens(
        [*tokenizer.encode(CALL_TEXT), eos], [*tokenizer.encode("done"), eos]
    )
    token_model = TokenModel(token_backend, tokenizer, tokenizer.chat_template, FixedParser())
    token_loop = AgentLoop(token_model, limits=LoopLimits(max_turns=TURNS))
    no_drift = TokenModel(
        token_backend, tokenizer, tokenizer.chat_template, FixedParser(), check_drift=False
    )
    no_drift_loop = AgentLoop(no_drift, limits=LoopLimits(max_turns=TURNS))
    user = [Message.user("go")]
    await token_loop.run(user, tools=[TOOL], executor=noop_tool)  # measure prompt lengths
    token_backend.final_at = token_backend.lengths[TURNS - 1]

    async def bare() -> None:
        await _bare_rollout(chat_backend, TURNS)

    async def chat() -> None:
        result = await chat_loop.run(user, tools=[TOOL], executor=noop_tool)
        assert result.turns == TURNS, result

    async def tokens() -> None:
        result = await token_loop.run(user, tools=[TOOL], executor=noop_tool)
        assert result.turns == TURNS, result
        assert result.drift is not None
        assert not result.drift.drifted, result.drift

    async def tokens_no_drift() -> None:
        result = await no_drift_loop.run(user, tools=[TOOL], executor=noop_tool)
        assert result.turns == TURNS, result

    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ("bare", "chat", "tok", "tok0")}
    for repeat in range(REPEATS):
        times["bare"].append(await _many(bare, ROLLOUTS))
        times["chat"].append(await _many(chat, ROLLOUTS))
        if repeat == 0:  # token mode is ~10x slower: one run each keeps the benchmark short
            times["tok"].append(await _many(tokens, ROLLOUTS))
            times["tok0"].append(await _many(tokens_no_drift, ROLLOUTS))
    return times


def _conversation(turns: int) -> list[Message]:
    messages = [Message.system("You are a careful agent."), Message.user("Fix the failing test.")]
    for turn in range(turns):
        call = ToolCall(f"c{turn}", "noop", json.dumps({"x": turn}))
        messages.append(Message.assistant(f"Step {turn}: checking.", (call,)))
        messages.append(Message.tool(f"{RESULT_TEXT} #{turn}", f"c{turn}", "noop"))
    return messages


def bookkeeping(tokenizer: HFTokenizer, turns: int) -> tuple[float, float]:
    """Seconds per turn (median over turns of one rollout) for bridge vs full re-render."""
    template = tokenizer.chat_template
    messages = _conversation(turns)
    bridge = TemplateBridge(template, [TOOL])
    bridge_s: list[float] = []
    full_s: list[float] = []
    for turn in range(turns):
        upto = 2 + 2 * (turn + 1)
        new = messages[upto - 1 : upto]
        started = time.perf_counter()
        tokenizer.encode(bridge.after_turn(new, add_generation_prompt=True))
        bridge_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        tokenizer.encode(template.render(messages[:upto], tools=[TOOL], add_generation_prompt=True))
        full_s.append(time.perf_counter() - started)
    return statistics.mean(bridge_s), statistics.mean(full_s)


def _tokenizer(directory: Path) -> HFTokenizer:
    """A real byte-level BPE (vocab 4k) trained here, saved and loaded as an HF tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [CALL_TEXT, RESULT_TEXT, *(_line(i) for i in range(2000))]
    trainer = trainers.BpeTrainer(
        vocab_size=4000,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHATML,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return HFTokenizer.from_directory(directory)


def _line(i: int) -> str:
    words = ["agent", "tool", "call", "result", "error", "file", "test", "patch", "run", "ok"]
    return " ".join(words[(i * 7 + k * 3) % len(words)] + str(k % 5) for k in range(12))


def _us(seconds: float, turns: int) -> float:
    return seconds / turns * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = _tokenizer(Path(tmp))
    load_before = os.getloadavg()[0]
    times = anyio.run(overhead, tokenizer)
    total_turns = ROLLOUTS * TURNS
    wall = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
    cpu = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
    rows = [
        "| loop | runs | wall s | turns/s (wall) | us/turn wall | us/turn CPU | CPU vs bare |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in [
        ("bare", "bare hand-written loop (baseline)"),
        ("chat", "AgentLoop, chat mode"),
        ("tok0", "AgentLoop, token mode (ledger + bridge + decode + parse)"),
        ("tok", "AgentLoop, token mode + drift check per rollout"),
    ]:
        rows.append(
            f"| {label} | {len(times[key])} | {wall[key]:.2f} | {total_turns / wall[key]:,.0f} | "
            f"{_us(wall[key], total_turns):.1f} | {_us(cpu[key], total_turns):.1f} | "
            f"{cpu[key] / cpu['bare']:.1f}x |"
        )
    book = [
        "| turns | bridge us/turn | re-render + re-tokenize us/turn | ratio |",
        "|---|---|---|---|",
    ]
    for turns in (10, 50, 100):
        results = [bookkeeping(tokenizer, turns) for _ in range(REPEATS)]
        bridge = statistics.median(r[0] for r in results)
        full = statistics.median(r[1] for r in results)
        book.append(f"| {turns} | {bridge * 1e6:.1f} | {full * 1e6:.1f} | {full / bridge:.1f}x |")
    load_after = os.getloadavg()[0]
    body = (
        f"Loop overhead: {ROLLOUTS:,} concurrent rollouts x {TURNS} turns on one event loop, "
        "zero-latency in-process backend, no-op tool (one schema-validated call per turn). All "
        "time is framework time; target < 100 us/turn. The machine was shared (1-minute load "
        f"average {load_before:.0f} before, {load_after:.0f} after, on "
        f"{os.cpu_count()} cores), so wall time is inflated by waiting for a CPU; process CPU "
        "time is the better measure of the framework's own cost.\n\n"
        + "\n".join(rows)
        + "\n\nToken bookkeeping per turn (mean over the turns of one rollout, median of 3): "
        "bridge = render only the new tool message after a fixed prefix and tokenize it; "
        "baseline = re-render and re-tokenize the whole history each turn (what atroposlib's "
        "ManagedServer does). Same ChatML template with the Hermes tool prompt, same byte-level "
        "BPE tokenizer (4k vocab, trained in the run), ~200-character tool results. The bridge "
        "cost is flat in the number of turns; the re-render cost grows linearly.\n\n"
        + "\n".join(book)
    )
    write_section(
        "loop",
        "hermes-loop: loop overhead and token bookkeeping",
        "uv run --frozen --no-sync python -m benchmarks loop",
        body,
    )


if __name__ == "__main__":
    main()
