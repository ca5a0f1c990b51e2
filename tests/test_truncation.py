"""A reply cut by the per-turn token limit is ``truncated``, never a ``final_answer``; a tool
call cut in the middle is reported as an invalid call and never run. Real parser (hermes),
real SmolLM2 tokenizer and template, and the real embedded model for a real ``length`` finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hermes_loop import AgentLoop, LoopLimits, TokenModel
from hermes_loop.embedded import EmbeddedModel, GGUFTokenizer, default_model_path
from hermes_parsers import get_parser
from hermes_protocols import (
    Generation,
    Message,
    SamplingParams,
    StopReason,
    ToolErrorKind,
    ToolResult,
    ToolSchema,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TERMINAL = ToolSchema(
    name="terminal",
    description="Run a shell command.",
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
)
TASK = [Message.system("You are a terminal agent."), Message.user("List the files.")]


class RecordingExecutor:
    """Runs nothing; records every call the loop asks for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Mapping[str, Any]]] = []

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls.append((name, arguments))
        return ToolResult(content='{"output": "a.txt\\n", "exit_code": 0, "error": null}')


class ScriptedBackend:
    """Answers with scripted texts (encoded by the real tokenizer) and finish reasons."""

    def __init__(self, tokenizer: GGUFTokenizer, turns: Sequence[tuple[str, str]]) -> None:
        self._tokenizer = tokenizer
        self._turns = list(turns)

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        text, finish = self._turns.pop(0)
        ids = self._tokenizer.encode(text)
        if finish == "stop":
            ids.append(self._tokenizer.eos_token_id)
        return Generation(ids, [-0.5] * len(ids), finish)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tokenizer() -> GGUFTokenizer:
    return GGUFTokenizer.from_gguf(default_model_path())


async def test_a_tool_call_cut_by_the_token_limit_is_reported_and_never_run(
    tokenizer: GGUFTokenizer,
) -> None:
    cut = '<tool_call>\n{"name": "terminal", "arguments": {"command": "ls -'
    backend = ScriptedBackend(tokenizer, [(cut, "length"), ("Nothing to do.", "stop")])
    model = TokenModel(backend, tokenizer, tokenizer.chat_template(), get_parser("hermes"))
    executor = RecordingExecutor()
    result = await AgentLoop(model, limits=LoopLimits(max_tokens_per_turn=64)).run(
        TASK, tools=[TERMINAL], executor=executor
    )
    assert executor.calls == []
    (error,) = result.tool_errors
    assert error.kind is ToolErrorKind.INVALID_ARGUMENTS
    assert "never closed" in error.message
    assert result.messages[3].role == "tool"  # the model is told, then answers
    assert result.stop_reason is StopReason.FINAL_ANSWER
    assert [s.finish_reason for s in result.turn_stats] == ["length", "stop"]


async def test_prose_cut_by_the_token_limit_is_truncated(tokenizer: GGUFTokenizer) -> None:
    backend = ScriptedBackend(tokenizer, [("First I will look at the", "length")])
    model = TokenModel(backend, tokenizer, tokenizer.chat_template(), get_parser("hermes"))
    result = await AgentLoop(model, limits=LoopLimits(max_tokens_per_turn=64)).run(
        TASK, tools=[TERMINAL], executor=RecordingExecutor()
    )
    assert result.stop_reason is StopReason.TRUNCATED


async def test_a_real_length_finish_of_the_embedded_model_is_truncated() -> None:
    async with await EmbeddedModel.open(n_ctx=1024) as embedded:
        loop = AgentLoop(
            embedded.token_model(get_parser("hermes")),
            sampling=SamplingParams(temperature=0.0, seed=0),
            limits=LoopLimits(max_tokens_per_turn=6),
        )
        result = await loop.run(
            [Message.user("Write a long story about a dragon who learns to read.")],
            tools=[],
            executor=RecordingExecutor(),
        )
    assert [s.finish_reason for s in result.turn_stats] == ["length"]
    assert result.turn_stats[0].completion_tokens == 6
    assert result.stop_reason is StopReason.TRUNCATED
    assert result.trace is not None
    assert sum(result.trace.mask) == 6
