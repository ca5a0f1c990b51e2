"""The embedded llama.cpp backends against the real SmolLM2-135M-Instruct model.

One model is loaded for the whole module (n_ctx 2048, one thread); every test wraps it in a
fresh :class:`EmbeddedTokenBackend`. The KV cache lives in the runtime, so its reuse carries
across tests exactly as it would across rollouts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import numpy as np
import pytest
from hermes_loop import JinjaChatTemplate, LoopLimits, TokenModel, run
from hermes_loop.embedded import (
    EmbeddedChatBackend,
    EmbeddedContextOverflow,
    EmbeddedModel,
    EmbeddedTokenBackend,
    GGUFTokenizer,
    LlamaRuntime,
    default_model_path,
)
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    ChatBackend,
    ConfigError,
    ConversionError,
    Generation,
    Message,
    ParsedToolCall,
    ParsedTurn,
    SamplingParams,
    StopReason,
    TokenBackend,
    ToolCall,
    ToolParseError,
    ToolResult,
    ToolSchema,
)

pytestmark = pytest.mark.slow

ADD = ToolSchema(
    name="add",
    description="Add two integers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
GREEDY = SamplingParams(temperature=0.0, max_tokens=48)


def worked_example(question: str, a: int, b: int, answer: str, index: int) -> list[Message]:
    call = ToolCall(f"example_{index}", "add", json.dumps({"a": a, "b": b}))
    return [
        Message.user(question),
        Message.assistant(None, (call,)),
        Message.tool(str(a + b), call.id, "add"),
        Message.assistant(answer),
    ]


#: two worked examples, then the real question: SmolLM2-135M answers it (greedy) with a
#: well-formed Hermes tool call, then with the result once the tool answered
TWO_SHOT = [
    *worked_example("What is 2 plus 2? Use the add tool.", 2, 2, "2 plus 2 is 4.", 0),
    *worked_example("What is 3 plus 9? Use the add tool.", 3, 9, "3 plus 9 is 12.", 1),
    Message.user("What is 7 plus 5? Use the add tool."),
]

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class HermesFormatParser:
    """Minimal Hermes-format parser: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``."""

    name = "hermes-minimal"

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        for index, match in enumerate(_CALL.finditer(text)):
            raw = match.group(1)
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                errors.append(
                    ToolParseError("invalid_json", str(exc), index, *match.span(), raw=raw)
                )
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                errors.append(ToolParseError("missing_name", "no name", index, *match.span()))
                continue
            arguments = obj.get("arguments", {})
            calls.append(
                ParsedToolCall(
                    name=obj["name"],
                    arguments=arguments if isinstance(arguments, dict) else None,
                    raw_arguments=json.dumps(arguments),
                )
            )
        start = text.find("<tool_call>")
        content = (text if start < 0 else text[:start]).strip()
        return ParsedTurn(content=content or None, tool_calls=calls, errors=errors)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        raise NotImplementedError

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> Any:
        raise NotImplementedError


class RecordingBackend:
    """Passes requests to the embedded backend and records prompts, generations, cache reuse."""

    def __init__(self, inner: EmbeddedTokenBackend) -> None:
        self.inner = inner
        self.prompts: list[list[int]] = []
        self.generations: list[Generation] = []
        self.reused: list[int] = []

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        generation = await self.inner.generate(prompt_ids, sampling=sampling)
        self.prompts.append(list(prompt_ids))
        self.generations.append(generation)
        self.reused.append(self.inner.last_reused)
        return generation


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def embedded_runtime() -> Iterator[LlamaRuntime]:
    with LlamaRuntime(default_model_path(), n_ctx=2048, n_threads=1) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def embedded_tokenizer() -> GGUFTokenizer:
    return GGUFTokenizer.from_gguf(default_model_path())


@pytest.fixture(scope="module")
def embedded_template(embedded_tokenizer: GGUFTokenizer) -> JinjaChatTemplate:
    return embedded_tokenizer.chat_template()


@pytest.fixture
def embedded_backend(embedded_runtime: LlamaRuntime) -> EmbeddedTokenBackend:
    return EmbeddedTokenBackend(embedded_runtime)


def chat_prompt(tokenizer: GGUFTokenizer, template: JinjaChatTemplate, text: str) -> list[int]:
    rendered = template.render([Message.user(text)], add_generation_prompt=True)
    return tokenizer.encode(rendered)


@pytest.mark.anyio
async def test_raw_logprobs_equal_a_teacher_forced_recompute(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    assert isinstance(embedded_backend, TokenBackend)
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Write a haiku about rain.")
    sampling = SamplingParams(
        temperature=1.0, top_p=0.95, top_k=50, max_tokens=24, seed=11, logprob_mode="raw"
    )
    generation = await embedded_backend.generate(prompt, sampling=sampling)
    assert generation.logprob_mode == "raw"
    assert len(generation.ids) >= 8
    assert any(lp < -0.5 for lp in generation.logprobs)  # real draws, not all near-certain
    # the same seed draws the same tokens (this time from a fully cached prompt)
    again = await embedded_backend.generate(prompt, sampling=sampling)
    assert again.ids == generation.ids
    assert embedded_backend.last_reused == len(prompt) - 1
    # one pass over the whole sequence from an empty cache, as a trainer would recompute it
    reference = await embedded_backend.score([*prompt, *generation.ids], start=len(prompt))
    assert reference == pytest.approx(list(generation.logprobs), abs=1e-6)


@pytest.mark.anyio
async def test_scoring_from_a_later_start_gives_the_same_logprobs(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    """llama.cpp computes logits only from ``start`` on (most of a rollout is prompt); the
    rows it does compute are those of a whole-sequence score, across the micro-batch and the
    512-id batch edges (a batch before ``start`` computes no row)."""
    ids = chat_prompt(embedded_tokenizer, embedded_template, "Count from one to twenty. " * 90)
    assert len(ids) > 530
    whole = await embedded_backend.score(ids, start=1)
    for start in (2, 33, 514, len(ids)):
        tail = await embedded_backend.score(ids, start=start)
        assert tail == pytest.approx(whole[start - 1 :], abs=1e-6), start


@pytest.mark.anyio
async def test_scoring_a_group_evaluates_its_shared_prompt_once_and_gives_the_same_logprobs(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    """``fresh=False`` starts after the prefix the cache holds: the group's second and third
    completions cost their own ids only, and every logprob is bitwise a fresh score's."""
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Name a colour. " * 40)
    group = [
        [*prompt, *embedded_tokenizer.encode(text)]
        for text in ("Blue, like the sea.", "Red.", "Green is my favourite colour.")
    ]
    fresh = [await embedded_backend.score(ids, start=len(prompt)) for ids in group]
    runtime = embedded_backend.runtime
    shared = []
    for ids in group:
        before = runtime.n_decoded
        shared.append(await embedded_backend.score(ids, start=len(prompt), fresh=False))
        shared_evaluated = runtime.n_decoded - before
    assert shared == fresh
    # the last one evaluated its completion and the prompt's last id, not the whole prompt
    assert shared_evaluated == len(group[-1]) - len(prompt) + 1


@pytest.mark.anyio
async def test_sampled_logprobs_are_those_of_the_tempered_distribution(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Write a poem about snow.")
    sampling = SamplingParams(temperature=0.7, max_tokens=24, seed=5)
    generation = await embedded_backend.generate(prompt, sampling=sampling)
    assert generation.logprob_mode == "sampled"
    raw = await embedded_backend.generate(
        prompt, sampling=attrs.evolve(sampling, logprob_mode="raw")
    )
    assert raw.ids == generation.ids  # the mode changes what is recorded, not what is drawn
    ids = [*prompt, *generation.ids]
    rows = (await embedded_backend.teacher_logits(ids, start=len(prompt))).astype(np.float64)
    tempered = rows / 0.7
    tempered -= tempered.max(axis=1, keepdims=True)
    tempered -= np.log(np.exp(tempered).sum(axis=1, keepdims=True))
    untempered = rows - rows.max(axis=1, keepdims=True)
    untempered -= np.log(np.exp(untempered).sum(axis=1, keepdims=True))
    expected = [tempered[i, t] for i, t in enumerate(generation.ids)]
    expected_raw = [untempered[i, t] for i, t in enumerate(generation.ids)]
    assert list(generation.logprobs) == pytest.approx(expected, abs=1e-5)
    assert list(raw.logprobs) == pytest.approx(expected_raw, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(expected, expected_raw, strict=True)) > 0.05


@pytest.mark.anyio
async def test_eos_is_returned_and_max_tokens_respected(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Hi!")
    done = await embedded_backend.generate(prompt, sampling=GREEDY)
    assert done.finish_reason == "stop"
    assert done.ids[-1] == embedded_tokenizer.eos_token_id
    assert embedded_tokenizer.eos_token_id not in done.ids[:-1]
    short = await embedded_backend.generate(prompt, sampling=SamplingParams(max_tokens=3, seed=5))
    assert short.finish_reason == "length"
    assert len(short.ids) == 3


@pytest.mark.anyio
async def test_stop_strings_end_the_generation_on_the_completing_token(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Tell me a story about a fox.")
    free = await embedded_backend.generate(prompt, sampling=SamplingParams(0.0, max_tokens=12))
    text = embedded_tokenizer.decode(free.ids)
    stop = text[len(embedded_tokenizer.decode(free.ids[:6])) - 2 :][:4]
    assert len(stop) == 4
    stopped = await embedded_backend.generate(
        prompt, sampling=SamplingParams(0.0, max_tokens=12, stop=("@@never@@", stop))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.ids == free.ids[: len(stopped.ids)]
    assert stop in embedded_tokenizer.decode(stopped.ids)
    assert stop not in embedded_tokenizer.decode(stopped.ids[:-1])


@pytest.mark.anyio
async def test_kv_cache_reuse_gives_the_same_tokens_as_a_cold_start(
    embedded_backend: EmbeddedTokenBackend,
    embedded_runtime: LlamaRuntime,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Name three colors.")
    first = await embedded_backend.generate(prompt, sampling=SamplingParams(0.0, max_tokens=6))
    bridge = embedded_tokenizer.encode("<|im_end|>\n<|im_start|>user\nOne more?<|im_end|>\n")
    bridge += embedded_tokenizer.encode("<|im_start|>assistant\n")
    second_prompt = [*prompt, *first.ids, *bridge]
    sampling = SamplingParams(temperature=0.8, max_tokens=6, seed=3)
    warm = await embedded_backend.generate(second_prompt, sampling=sampling)
    # everything but the last sampled token (never fed back) came from the cache
    assert embedded_backend.last_reused == len(prompt) + len(first.ids) - 1
    assert embedded_backend.last_evaluated == len(bridge) + 1
    embedded_runtime.truncate(0)
    cold = await embedded_backend.generate(second_prompt, sampling=sampling)
    assert embedded_backend.last_reused == 0
    assert cold.ids == warm.ids
    assert cold.logprobs == pytest.approx(warm.logprobs, abs=1e-6)


@pytest.mark.anyio
async def test_concurrent_requests_queue_in_arrival_order(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompts = {
        name: chat_prompt(embedded_tokenizer, embedded_template, f"Say something about {name}.")
        for name in ("cats", "dogs", "owls", "bees")
    }
    finished: list[str] = []
    results: dict[str, Generation] = {}

    async def request(name: str, seed: int) -> None:
        sampling = SamplingParams(max_tokens=3, seed=seed)
        results[name] = await embedded_backend.generate(prompts[name], sampling=sampling)
        finished.append(name)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for seed, name in enumerate(prompts):
                group.start_soon(request, name, seed)
                await anyio.wait_all_tasks_blocked()
    assert finished == list(prompts)
    for seed, name in enumerate(prompts):  # interleaving did not disturb any request
        alone = await embedded_backend.generate(
            prompts[name], sampling=SamplingParams(max_tokens=3, seed=seed)
        )
        assert alone.ids == results[name].ids


@pytest.mark.anyio
async def test_cancellation_stops_the_worker_between_tokens(
    embedded_backend: EmbeddedTokenBackend,
    embedded_runtime: LlamaRuntime,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Write a very long essay.")
    await embedded_backend.generate(prompt, sampling=SamplingParams(max_tokens=1, seed=0))
    before = embedded_runtime.n_decoded
    started = time.perf_counter()
    # greedy: the default model falls into a loop on this prompt and runs to max_tokens (2.9 s
    # for the first 400 ids here), so the cancel lands mid-generation whatever a sampled text
    # would have been (a seed-0 sample ended after 12 ids once the attention loop changed)
    with anyio.move_on_after(1.5) as scope:
        await embedded_backend.generate(prompt, sampling=SamplingParams(0.0, max_tokens=1500))
    assert scope.cancelled_caught
    assert time.perf_counter() - started < 5  # the caller got control back at once
    with anyio.fail_after(60):  # waits for the abandoned worker to notice the flag
        after = await embedded_backend.generate(prompt, sampling=SamplingParams(0.0, max_tokens=2))
    assert len(after.ids) == 2
    decoded_by_cancelled = embedded_runtime.n_decoded - before - embedded_backend.last_evaluated - 1
    assert 0 <= decoded_by_cancelled < 1500


@pytest.mark.anyio
async def test_timeouts_are_typed_and_leave_the_backend_usable(
    embedded_runtime: LlamaRuntime,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    # 10 ms is below one decode step of this model on this CPU, so the request cannot finish
    # in time whatever the sampled text (an early EOS cannot make the test pass by luck)
    backend = EmbeddedTokenBackend(embedded_runtime, timeout_s=0.01)
    prompt = chat_prompt(embedded_tokenizer, embedded_template, "Count to one thousand.")
    with pytest.raises(BackendTimeout, match=r"did not answer within 0\.01 s"):
        await backend.generate(prompt, sampling=SamplingParams(max_tokens=1500, seed=1))
    backend.timeout_s = 60
    assert len((await backend.generate(prompt, sampling=SamplingParams(max_tokens=1))).ids) == 1


@pytest.mark.anyio
async def test_bad_requests_fail_before_touching_the_model(
    embedded_backend: EmbeddedTokenBackend,
) -> None:
    with pytest.raises(ConfigError, match="empty"):
        await embedded_backend.generate([], sampling=GREEDY)
    with pytest.raises(ConfigError, match="prompt ids"):
        await embedded_backend.generate([1, 49152], sampling=GREEDY)
    with pytest.raises(EmbeddedContextOverflow):
        await embedded_backend.generate([198] * embedded_backend.n_ctx, sampling=GREEDY)
    with pytest.raises(ConfigError, match="top_p"):
        await embedded_backend.generate([1, 2], sampling=SamplingParams(top_p=2.0))
    assert issubclass(EmbeddedContextOverflow, BackendError)


@pytest.mark.anyio
async def test_embedded_model_opens_fills_a_small_context_and_closes(tmp_path: Path) -> None:
    async with await EmbeddedModel.open(n_ctx=256, n_threads=1) as model:
        backend = model.backend
        assert backend.n_ctx == 256
        assert isinstance(model.chat_backend(HermesFormatParser()), ChatBackend)
        # SmolLM2's GGUF ends generation on three ids, not only EOS (<|im_end|>, 2)
        assert model.end_token_ids == {0, 2, 4}
        assert model.tokenizer.eos_token_id == 2
        assert model.token_model(HermesFormatParser()).end_token_ids == {0, 2, 4}
        assert model.chat_backend(HermesFormatParser()).end_token_ids == {0, 2, 4}
        directory = await model.hf_tokenizer_dir(tmp_path)
        assert (directory / "tokenizer.json").is_file()
        prompt = model.tokenizer.encode("one two three four five six seven eight " * 30)
        prompt = prompt[: backend.n_ctx - 6]
        # greedy: sampled, an end id among the last 7 positions stopped it first in one CI run
        generation = await backend.generate(prompt, sampling=GREEDY)
        assert generation.finish_reason == "length"
        assert len(prompt) + len(generation.ids) == backend.n_ctx + 1  # last id never fed
    with pytest.raises(BackendError, match="closed"):
        await backend.generate([1, 2], sampling=GREEDY)


@pytest.mark.anyio
async def test_chat_backend_returns_parsed_tool_calls_and_plain_answers(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    chat = EmbeddedChatBackend(
        embedded_backend, embedded_tokenizer, embedded_template, HermesFormatParser()
    )
    assert isinstance(chat, ChatBackend)
    plain = await chat.chat(
        [Message.user("Hi!")], tools=[], sampling=SamplingParams(0.0, max_tokens=20), n=2
    )
    assert len(plain.choices) == 2
    for option in plain.choices:
        assert option.finish_reason == "stop"
        assert option.message.content
        assert "<|im_end|>" not in option.message.content
        assert not option.message.tool_calls

    # last, so that the rollout test below finds this prompt in the KV cache
    result = await chat.chat(TWO_SHOT, tools=[ADD], sampling=GREEDY)
    (choice,) = result.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.name == "add"
    assert call.parsed_arguments() == {"a": 7, "b": 5}
    rendered = embedded_template.render(TWO_SHOT, tools=[ADD], add_generation_prompt=True)
    assert result.usage.prompt_tokens == len(embedded_tokenizer.encode(rendered))


def test_runtime_declares_the_ggufs_end_of_generation_ids(
    embedded_runtime: LlamaRuntime,
) -> None:
    assert embedded_runtime.eog_ids == {0, 2, 4}
    pieces = {embedded_runtime.piece(i) for i in embedded_runtime.eog_ids}
    assert pieces == {b"<|endoftext|>", b"<|im_end|>", b"<reponame>"}
    assert all(embedded_runtime.is_eog(i) for i in (0, 2, 4))
    assert not embedded_runtime.is_eog(1)  # <|im_start|> is special but does not end a turn


@pytest.mark.anyio
async def test_chat_backend_drops_any_trailing_end_id(
    embedded_tokenizer: GGUFTokenizer, embedded_template: JinjaChatTemplate
) -> None:
    class EndsWithEndOfText:
        async def generate(
            self, prompt_ids: Sequence[int], *, sampling: SamplingParams
        ) -> Generation:
            ids = [*embedded_tokenizer.encode("Hello there."), 0]  # <|endoftext|>, not EOS
            return Generation(ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")

    chat = EmbeddedChatBackend(
        EndsWithEndOfText(),
        embedded_tokenizer,
        embedded_template,
        HermesFormatParser(),
        end_token_ids={0, 2, 4},
    )
    (choice,) = (await chat.chat([Message.user("Hi")], tools=[], sampling=GREEDY)).choices
    assert choice.message.content == "Hello there."


@pytest.mark.anyio
async def test_chat_backend_reports_malformed_calls_as_calls(
    embedded_tokenizer: GGUFTokenizer, embedded_template: JinjaChatTemplate
) -> None:
    class Scripted:
        async def generate(
            self, prompt_ids: Sequence[int], *, sampling: SamplingParams
        ) -> Generation:
            text = 'Let me add.<tool_call>\n{"name": "add", "arguments": {"a": 7,}}\n</tool_call>'
            ids = embedded_tokenizer.encode(text + "<|im_end|>")
            return Generation(ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")

    chat = EmbeddedChatBackend(
        Scripted(), embedded_tokenizer, embedded_template, HermesFormatParser()
    )
    (choice,) = (await chat.chat([Message.user("7+5?")], tools=[ADD], sampling=GREEDY)).choices
    assert choice.message.content == "Let me add."
    (call,) = choice.message.tool_calls
    assert call.name == "invalid_tool_call"
    assert call.arguments == '{"name": "add", "arguments": {"a": 7,}}'
    with pytest.raises(ConversionError):
        call.parsed_arguments()


@pytest.mark.anyio
async def test_multi_turn_token_rollout_records_exactly_the_sampled_ids(
    embedded_backend: EmbeddedTokenBackend,
    embedded_tokenizer: GGUFTokenizer,
    embedded_template: JinjaChatTemplate,
) -> None:
    recorder = RecordingBackend(embedded_backend)
    model = TokenModel(
        backend=recorder,
        tokenizer=embedded_tokenizer,
        template=embedded_template,
        parser=HermesFormatParser(),
        end_token_ids=embedded_backend.end_token_ids,
    )
    calls: list[tuple[str, dict[str, Any]]] = []

    async def executor(name: str, arguments: Mapping[str, Any]) -> ToolResult:
        calls.append((name, dict(arguments)))
        return ToolResult(content=str(arguments["a"] + arguments["b"]))

    with anyio.fail_after(150):
        result = await run(
            model,
            TWO_SHOT,
            tools=[ADD],
            executor=executor,
            sampling=SamplingParams(temperature=0.0, logprob_mode="raw"),
            limits=LoopLimits(max_turns=4, max_tokens_per_turn=48),
        )
    # the model called the tool itself, then answered with its result
    assert result.error is None
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.turns == 2
    assert calls == [("add", {"a": 7, "b": 5})]
    assert "12" in (result.messages[-1].content or "")

    first, second = recorder.generations
    prompt = recorder.prompts[0]
    rendered = embedded_template.render(TWO_SHOT, tools=[ADD], add_generation_prompt=True)
    assert prompt == embedded_tokenizer.encode(rendered)
    assert first.ids[-1] == embedded_tokenizer.eos_token_id  # EOS kept, as sampled
    # the second prompt is the first one, the generated ids untouched, then bridge ids
    assert recorder.prompts[1][: len(prompt) + len(first.ids)] == [*prompt, *first.ids]
    bridge = recorder.prompts[1][len(prompt) + len(first.ids) :]
    assert embedded_tokenizer.decode(bridge) == (
        "\n<|im_start|>tool\n<tool_response>\n12\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert recorder.reused[1] == len(prompt) + len(first.ids) - 1  # KV cache carried over

    trace = result.trace
    assert trace is not None
    assert trace.source == "sampler"
    assert list(trace.ids) == [*prompt, *first.ids, *bridge, *second.ids]
    assert list(trace.mask) == (
        [0] * len(prompt) + [1] * len(first.ids) + [0] * len(bridge) + [1] * len(second.ids)
    )
    assert list(trace.logprobs) == (
        [0.0] * len(prompt) + list(first.logprobs) + [0.0] * len(bridge) + list(second.logprobs)
    )
    assert result.drift is not None
    assert not result.drift.drifted

    # and the trainable logprobs are what the model assigns those ids, recomputed in one pass
    reference = await embedded_backend.score(trace.ids, start=1)
    for position, (mask, logprob) in enumerate(zip(trace.mask, trace.logprobs, strict=True)):
        if mask:
            assert logprob == pytest.approx(reference[position - 1], abs=1e-6)
