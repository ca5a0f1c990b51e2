"""Agent loop behaviour: stop reasons, tool-call validation, concurrency, cancellation, hooks."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from hermes_loop import (
    AgentLoop,
    ChatModel,
    GenerationFinished,
    HFTokenizer,
    JinjaChatTemplate,
    LoopEvent,
    LoopLimits,
    RolloutFinished,
    TokenModel,
    ToolCallFinished,
    TurnStarted,
    run,
)
from hermes_protocols import (
    Agent,
    ConfigError,
    Generation,
    Message,
    SamplingParams,
    SandboxError,
    StopReason,
    ToolCall,
    ToolErrorKind,
    ToolExecutor,
    ToolResult,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

USER = [Message.user("please echo")]


def echo_call(call_id: str, arguments: str, name: str = "echo") -> Message:
    return Message.assistant(None, (ToolCall(call_id, name, arguments),))


def live_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()}


@pytest.mark.anyio
async def test_final_answer_and_tool_round_trip(kit: Any) -> None:
    backend = kit.ScriptedChatBackend(
        [echo_call("c1", '{"text": "hi"}'), Message.assistant("done", reasoning="thought")]
    )
    executor = kit.RecordingExecutor()
    result = await run(ChatModel(backend), USER, tools=[kit.ECHO], executor=executor)
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.turns == 2
    assert executor.calls == [("echo", {"text": "hi"})]
    assert result.messages[2] == Message.tool('echo:{"text": "hi"}', "c1", "echo")
    assert result.messages[-1].content == "done"
    assert backend.requests[1][-1] == result.messages[2]  # tool result went back to the model
    assert [s.tool_calls for s in result.turn_stats] == [1, 0]
    assert result.turn_stats[1].reasoning == "thought"
    assert result.trace is None
    assert result.tool_errors == ()


@pytest.mark.anyio
async def test_max_turns(kit: Any) -> None:
    backend = kit.ScriptedChatBackend([echo_call(f"c{i}", '{"text": "x"}') for i in range(5)])
    loop = AgentLoop(ChatModel(backend), limits=LoopLimits(max_turns=3))
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.turns == 3
    assert len(backend.requests) == 3
    assert result.messages[-1].role == "tool"


@pytest.mark.anyio
async def test_context_exhausted_in_token_mode_never_truncates(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    call = [*tok.encode(kit.call_text("echo", {"text": "a"})), tok.eos_token_id]
    backend = kit.ScriptedTokenBackend([Generation(call, [-1.0] * len(call), "stop")] * 50)
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    prompt_len = len(
        tok.encode(tok.chat_template.render(USER, tools=[kit.ECHO], add_generation_prompt=True))
    )
    budget = prompt_len + 200
    loop = AgentLoop(model, limits=LoopLimits(max_context_tokens=budget, max_tokens_per_turn=64))
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.CONTEXT_EXHAUSTED
    assert result.trace is not None
    assert result.trace.ids[:prompt_len] == tuple(backend.prompts[0])  # history kept whole
    for prompt, sampling in zip(backend.prompts, backend.sampling, strict=True):
        assert sampling.max_tokens == min(64, budget - len(prompt))  # per-turn cap, separate
    assert len(result.trace) >= budget


@pytest.mark.anyio
async def test_length_cut_by_context_budget_is_context_exhausted(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    text = tok.encode("hello world")
    backend = kit.ScriptedTokenBackend([Generation(text, [-1.0] * len(text), "length")])
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    prompt_len = len(tok.encode(tok.chat_template.render(USER, add_generation_prompt=True)))
    limits = LoopLimits(max_context_tokens=prompt_len + len(text), max_tokens_per_turn=500)
    result = await AgentLoop(model, limits=limits).run(
        USER, tools=[], executor=kit.RecordingExecutor()
    )
    assert result.stop_reason == StopReason.CONTEXT_EXHAUSTED
    assert backend.sampling[0].max_tokens == len(text)


@pytest.mark.anyio
async def test_reply_cut_by_turn_limit_is_truncated_not_final(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    text = tok.encode("I will now look at the files and")
    backend = kit.ScriptedTokenBackend([Generation(text, [-1.0] * len(text), "length")])
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    limits = LoopLimits(max_context_tokens=100_000, max_tokens_per_turn=len(text))
    result = await AgentLoop(model, limits=limits).run(
        USER, tools=[kit.ECHO], executor=kit.RecordingExecutor()
    )
    assert result.stop_reason == StopReason.TRUNCATED
    assert result.turn_stats[-1].finish_reason == "length"
    assert result.trace is not None  # the cut reply is still recorded, token for token
    assert result.trace.ids[-len(text) :] == tuple(text)


@pytest.mark.anyio
async def test_complete_reply_at_stop_is_final_answer(kit: Any, hf_tokenizer: HFTokenizer) -> None:
    tok = hf_tokenizer
    text = [*tok.encode("All done."), tok.eos_token_id]
    backend = kit.ScriptedTokenBackend([Generation(text, [-1.0] * len(text), "stop")])
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    result = await AgentLoop(model, limits=LoopLimits(max_tokens_per_turn=len(text))).run(
        USER, tools=[kit.ECHO], executor=kit.RecordingExecutor()
    )
    assert result.stop_reason == StopReason.FINAL_ANSWER


@pytest.mark.anyio
async def test_each_turn_samples_with_its_own_reproducible_seed(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    call = [*tok.encode(kit.call_text("echo", {"text": "a"})), tok.eos_token_id]
    seeds: list[list[int | None]] = []
    for _ in range(2):
        backend = kit.ScriptedTokenBackend([Generation(call, [-1.0] * len(call), "stop")] * 4)
        model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
        loop = AgentLoop(model, sampling=SamplingParams(seed=7), limits=LoopLimits(max_turns=4))
        await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
        seeds.append([s.seed for s in backend.sampling])
    assert seeds[0] == seeds[1]  # reproducible
    assert seeds[0][0] == 7
    assert len(set(seeds[0])) == 4  # a restarted random stream never replays a turn


@pytest.mark.anyio
async def test_rollout_timeout_keeps_partial_result(kit: Any) -> None:
    backend = kit.ScriptedChatBackend([echo_call("c1", '{"text": "x"}')] * 3)
    loop = AgentLoop(
        ChatModel(backend), limits=LoopLimits(rollout_timeout_s=0.3, tool_timeout_s=30)
    )
    started = time.perf_counter()
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor(delay=5))
    assert time.perf_counter() - started < 2
    assert result.stop_reason == StopReason.ROLLOUT_TIMEOUT
    assert result.turns == 1
    assert result.messages[-1].tool_calls  # the call that was running when time ran out


@pytest.mark.anyio
async def test_backend_error_returns_partial_trajectory(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    call = [*tok.encode(kit.call_text("echo", {"text": "a"})), tok.eos_token_id]
    backend = kit.ScriptedTokenBackend([Generation(call, [-0.5] * len(call), "stop")])
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    result = await AgentLoop(model).run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.BACKEND_ERROR
    assert result.error is not None
    assert "server went away" in result.error
    assert result.turns == 1
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert result.trace is not None
    assert result.trace.num_trainable == len(call)


@pytest.mark.anyio
async def test_cancel_event_mid_turn_returns_promptly(kit: Any) -> None:
    backend = kit.ScriptedChatBackend([echo_call("c1", '{"text": "x"}')] * 3, block=2)
    cancel = anyio.Event()
    before = live_tasks()
    result_box: list[Any] = []

    async def rollout() -> None:
        result_box.append(
            await run(
                ChatModel(backend),
                USER,
                tools=[kit.ECHO],
                executor=kit.RecordingExecutor(),
                cancel=cancel,
            )
        )

    async with anyio.create_task_group() as group:
        group.start_soon(rollout)
        with anyio.fail_after(5):
            await backend.blocked.wait()
        started = time.perf_counter()
        cancel.set()
    assert time.perf_counter() - started < 0.5
    (result,) = result_box
    assert result.stop_reason == StopReason.CANCELLED
    assert result.turns == 1
    assert live_tasks() - before == set()


@pytest.mark.anyio
async def test_outer_cancellation_propagates_and_leaves_no_task(kit: Any) -> None:
    backend = kit.ScriptedChatBackend(
        [
            Message.assistant(
                None,
                (ToolCall("a", "echo", '{"text": "1"}'), ToolCall("b", "echo", '{"text": "2"}')),
            )
        ]
    )
    executor = kit.RecordingExecutor(delay=30)
    before = live_tasks()
    started = time.perf_counter()
    with anyio.move_on_after(0.2) as scope:
        await run(ChatModel(backend), USER, tools=[kit.ECHO], executor=executor)
    assert scope.cancelled_caught
    assert time.perf_counter() - started < 1
    assert len(executor.calls) == 2  # both calls were running concurrently
    assert live_tasks() - before == set()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "name", "kind", "needle"),
    [
        ('{"text": ', "echo", ToolErrorKind.INVALID_ARGUMENTS, "not valid JSON"),
        ('["x"]', "echo", ToolErrorKind.INVALID_ARGUMENTS, "must be a JSON object"),
        ('{"text": 3}', "echo", ToolErrorKind.SCHEMA_VIOLATION, "3 is not of type 'string'"),
        ("{}", "echo", ToolErrorKind.SCHEMA_VIOLATION, "'text' is a required property"),
        ('{"text": "a", "x": 1}', "echo", ToolErrorKind.SCHEMA_VIOLATION, "Additional"),
        ('{"text": "a"}', "rm_rf", ToolErrorKind.UNKNOWN_TOOL, "unknown tool 'rm_rf'"),
    ],
)
async def test_bad_calls_never_reach_the_tool(
    kit: Any, arguments: str, name: str, kind: ToolErrorKind, needle: str
) -> None:
    backend = kit.ScriptedChatBackend([echo_call("c1", arguments, name), Message.assistant("ok")])
    executor = kit.RecordingExecutor()
    result = await run(ChatModel(backend), USER, tools=[kit.ECHO], executor=executor)
    assert executor.calls == []
    (error,) = result.tool_errors
    assert (error.kind, error.turn, error.tool, error.arguments) == (kind, 1, name, arguments)
    assert needle in error.message
    tool_message = result.messages[2]
    assert tool_message.role == "tool"
    assert tool_message.tool_call_id == "c1"
    assert needle in (tool_message.content or "")
    assert result.stop_reason == StopReason.FINAL_ANSWER


@pytest.mark.anyio
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    arguments=st.text(max_size=30)
    | st.builds(
        json.dumps,
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
    )
)
async def test_only_schema_valid_arguments_reach_the_tool(kit: Any, arguments: str) -> None:
    backend = kit.ScriptedChatBackend([echo_call("c1", arguments), Message.assistant("ok")])
    executor = kit.RecordingExecutor()
    result = await run(ChatModel(backend), USER, tools=[kit.ECHO], executor=executor)
    try:
        decoded = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        decoded = None
    valid = (
        isinstance(decoded, dict) and set(decoded) == {"text"} and isinstance(decoded["text"], str)
    )
    assert bool(executor.calls) == valid
    assert bool(result.tool_errors) == (not valid)
    if valid:
        assert executor.calls == [("echo", decoded)]


@pytest.mark.anyio
async def test_token_mode_malformed_call_is_reported_not_executed(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    text = (
        '<tool_call>\n{"name": "echo", "arguments": {"text": oops}}\n</tool_call>\n'
        + kit.call_text("echo", {"text": 5})
        + "\n"
        + kit.call_text("echo", {"text": "fine"})
    )
    first = [*tok.encode(text), tok.eos_token_id]
    final = [*tok.encode("done"), tok.eos_token_id]
    backend = kit.ScriptedTokenBackend(
        [
            Generation(first, [-1.0] * len(first), "stop"),
            Generation(final, [-1.0] * len(final), "stop"),
        ]
    )
    executor = kit.RecordingExecutor()
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    result = await AgentLoop(model).run(USER, tools=[kit.ECHO], executor=executor)
    assert executor.calls == [("echo", {"text": "fine"})]
    kinds = [e.kind for e in result.tool_errors]
    assert kinds == [ToolErrorKind.INVALID_ARGUMENTS, ToolErrorKind.SCHEMA_VIOLATION]
    assistant = result.messages[1]
    assert [c.id for c in assistant.tool_calls] == ["call_1_0", "call_1_1", "call_1_2"]
    tool_msgs = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_msgs] == ["call_1_0", "call_1_1", "call_1_2"]
    assert "invalid_json" in (tool_msgs[0].content or "")
    assert tool_msgs[2].content == 'echo:{"text": "fine"}'


@pytest.mark.anyio
async def test_execution_error_and_tool_timeout_are_recorded(kit: Any) -> None:
    async def executor(name: str, arguments: Mapping[str, Any]) -> ToolResult:
        if arguments["text"] == "boom":
            raise SandboxError("disk on fire")
        await anyio.sleep(10)
        return ToolResult(content="never")

    reply = Message.assistant(
        None,
        (ToolCall("a", "echo", '{"text": "boom"}'), ToolCall("b", "echo", '{"text": "slow"}')),
    )
    backend = kit.ScriptedChatBackend([reply, Message.assistant("ok")])
    loop = AgentLoop(ChatModel(backend), limits=LoopLimits(tool_timeout_s=0.1))
    result = await loop.run(USER, tools=[kit.ECHO], executor=executor)
    assert [(e.kind, e.tool) for e in result.tool_errors] == [
        (ToolErrorKind.EXECUTION_ERROR, "echo"),
        (ToolErrorKind.TIMEOUT, "echo"),
    ]
    assert "disk on fire" in result.tool_errors[0].message
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["a", "b"]
    assert result.stop_reason == StopReason.FINAL_ANSWER


@pytest.mark.anyio
async def test_a_bug_raises_instead_of_becoming_a_tool_or_backend_error(kit: Any) -> None:
    async def buggy(name: str, arguments: Mapping[str, Any]) -> ToolResult:
        raise KeyError("a bug in a tool")

    call = Message.assistant(None, (ToolCall("a", "echo", '{"text": "x"}'),))
    loop = AgentLoop(ChatModel(kit.ScriptedChatBackend([call, Message.assistant("ok")])))
    with pytest.raises(KeyError, match="a bug in a tool"):
        await loop.run(USER, tools=[kit.ECHO], executor=buggy)

    class BrokenBackend:
        async def chat(self, *args: Any, **kwargs: Any) -> Any:
            raise AttributeError("a bug in a backend")

    loop = AgentLoop(ChatModel(BrokenBackend()))  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="a bug in a backend"):
        await loop.run(USER, tools=[kit.ECHO], executor=buggy)


@pytest.mark.anyio
@pytest.mark.parametrize("concurrent", [True, False])
async def test_results_in_call_order_concurrent_or_sequential(kit: Any, concurrent: bool) -> None:
    finished: list[str] = []

    async def executor(name: str, arguments: Mapping[str, Any]) -> ToolResult:
        await anyio.sleep(float(arguments["text"]))
        finished.append(arguments["text"])
        return ToolResult(content=f"slept {arguments['text']}")

    delays = ["0.3", "0.1", "0.2"]
    reply = Message.assistant(
        None,
        tuple(ToolCall(f"c{i}", "echo", json.dumps({"text": d})) for i, d in enumerate(delays)),
    )
    backend = kit.ScriptedChatBackend([reply, Message.assistant("ok")])
    loop = AgentLoop(ChatModel(backend), concurrent_tool_calls=concurrent)
    started = time.perf_counter()
    result = await loop.run(USER, tools=[kit.ECHO], executor=executor)
    elapsed = time.perf_counter() - started
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents == [f"slept {d}" for d in delays]
    if concurrent:
        assert finished == ["0.1", "0.2", "0.3"]
        assert elapsed < 0.55
    else:
        assert finished == delays
        assert elapsed >= 0.6


@pytest.mark.anyio
async def test_tool_handler_and_observers(kit: Any) -> None:
    seen: list[LoopEvent] = []

    async def handler(
        call: ToolCall, arguments: Mapping[str, Any], executor: ToolExecutor
    ) -> ToolResult:
        inner = await executor(call.name, arguments)
        return ToolResult(content=f"[{call.id}] {inner.content}")

    backend = kit.ScriptedChatBackend([echo_call("c1", '{"text": "x"}'), Message.assistant("ok")])
    loop = AgentLoop(ChatModel(backend), tool_handler=handler, observers=[seen.append])
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.messages[2].content == '[c1] echo:{"text": "x"}'
    assert [type(e) for e in seen] == [
        TurnStarted,
        GenerationFinished,
        ToolCallFinished,
        TurnStarted,
        GenerationFinished,
        RolloutFinished,
    ]
    finished = seen[-1]
    assert isinstance(finished, RolloutFinished)
    assert finished.stop_reason == StopReason.FINAL_ANSWER


def test_limits_are_validated() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        LoopLimits(max_turns=0)
    with pytest.raises(ConfigError, match="rollout_timeout_s"):
        LoopLimits(rollout_timeout_s=-1)


def test_agent_loop_meets_the_agent_protocol(kit: Any) -> None:
    assert isinstance(AgentLoop(ChatModel(kit.ScriptedChatBackend([]))), Agent)


# renders only the last two messages: appending messages rewrites what came before
FORGETFUL = (
    "{% for m in messages[-2:] %}<{{ m.role }}>{{ m.content or '' }}</{{ m.role }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


@pytest.mark.anyio
async def test_unbridgeable_template_ends_rollout_with_partial_result(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    call = [*tok.encode(kit.call_text("echo", {"text": "a"})), tok.eos_token_id]
    backend = kit.ScriptedTokenBackend([Generation(call, [-1.0] * len(call), "stop")] * 2)
    template = JinjaChatTemplate(FORGETFUL, tool_fallback=True)
    model = TokenModel(backend, tok, template, kit.HermesTestParser())
    result = await AgentLoop(model).run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.BACKEND_ERROR
    assert result.error is not None
    assert "rewrites earlier turns" in result.error
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert result.trace is not None
    assert result.trace.num_trainable == len(call)


@pytest.mark.anyio
async def test_context_exhausted_in_chat_mode_uses_reported_usage(kit: Any) -> None:
    # the scripted server reports 10 prompt tokens per message and 5 completion tokens
    backend = kit.ScriptedChatBackend([echo_call(f"c{i}", '{"text": "x"}') for i in range(9)])
    loop = AgentLoop(ChatModel(backend), limits=LoopLimits(max_context_tokens=35))
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.CONTEXT_EXHAUSTED
    # context used before each turn: 0, then 10 + 5, then 30 + 5 = the whole budget
    assert result.turns == 2
    assert [s.prompt_tokens for s in result.turn_stats] == [10, 30]


@pytest.mark.anyio
async def test_generation_timeout_ends_rollout_with_backend_error(kit: Any) -> None:
    backend = kit.ScriptedChatBackend([echo_call("c1", '{"text": "x"}')] * 3, block=2)
    loop = AgentLoop(ChatModel(backend), limits=LoopLimits(generation_timeout_s=0.2))
    started = time.perf_counter()
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())
    assert time.perf_counter() - started < 2
    assert result.stop_reason == StopReason.BACKEND_ERROR
    assert result.error is not None
    assert "generation_timeout_s" in result.error
    assert result.turns == 1


@pytest.mark.anyio
async def test_failing_observer_is_logged_and_never_loses_the_rollout(
    kit: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[LoopEvent] = []

    def broken(event: LoopEvent) -> None:
        raise RuntimeError(f"observer bug on {type(event).__name__}")

    def script() -> Any:
        return kit.ScriptedChatBackend(
            [echo_call("c1", '{"text": "x"}'), Message.assistant("done")]
        )

    baseline = await run(
        ChatModel(script()), USER, tools=[kit.ECHO], executor=kit.RecordingExecutor()
    )
    executor = kit.RecordingExecutor()
    with caplog.at_level("ERROR", logger="hermes_loop.loop"):
        result = await run(
            ChatModel(script()),
            USER,
            tools=[kit.ECHO],
            executor=executor,
            observers=[broken, seen.append],
        )
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.messages == baseline.messages
    assert result.turns == baseline.turns == 2
    assert result.error is None
    assert executor.calls == [("echo", {"text": "x"})]
    # the observer after the broken one still got every event, RolloutFinished included
    assert [type(e) for e in seen] == [
        TurnStarted,
        GenerationFinished,
        ToolCallFinished,
        TurnStarted,
        GenerationFinished,
        RolloutFinished,
    ]
    failures = [r for r in caplog.records if r.name == "hermes_loop.loop"]
    assert len(failures) == len(seen)
    assert all(r.exc_info is not None for r in failures)
    assert "RolloutFinished" in failures[-1].getMessage()


class ThreadRecordingTokenizer:
    """The test tokenizer, recording (text length, thread name) of every encode call."""

    def __init__(self, inner: HFTokenizer) -> None:
        self.inner = inner
        self.encodes: list[tuple[int, str]] = []

    @property
    def eos_token_id(self) -> int:
        return self.inner.eos_token_id

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        self.encodes.append((len(text), threading.current_thread().name))
        return self.inner.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: Any) -> str:
        return self.inner.decode(ids)


@pytest.mark.anyio
async def test_long_first_prompt_is_tokenized_off_the_event_loop(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = ThreadRecordingTokenizer(hf_tokenizer)
    answer = [*hf_tokenizer.encode("ok"), hf_tokenizer.eos_token_id]
    backend = kit.ScriptedTokenBackend([Generation(answer, [-1.0] * len(answer), "stop")])
    model = TokenModel(backend, tok, hf_tokenizer.chat_template, kit.HermesTestParser())
    long_user = [Message.user("hello world " * 3000)]
    result = await AgentLoop(model).run(long_user, tools=[], executor=kit.RecordingExecutor())
    assert result.stop_reason == StopReason.FINAL_ANSWER
    prompt_text = hf_tokenizer.chat_template.render(long_user, add_generation_prompt=True)
    assert backend.prompts[0] == hf_tokenizer.encode(prompt_text)
    first_prompt = [name for size, name in tok.encodes if size == len(prompt_text)]
    assert first_prompt
    assert first_prompt[0] != threading.main_thread().name


@pytest.mark.anyio
async def test_the_record_names_the_seed_the_rollout_sampled_with(kit: Any) -> None:
    backend = kit.ScriptedChatBackend([Message.assistant("done")])
    loop = AgentLoop(ChatModel(backend), sampling=SamplingParams(seed=1))
    result = await loop.run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor(), seed=5)
    assert result.metadata["sampling"]["seed"] == 5
