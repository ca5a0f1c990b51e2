"""Tool-call ids: unique within a rollout and deterministic, whoever provides them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
from hermes_loop import AgentLoop, CallIds, ChatModel, HFTokenizer, TokenModel
from hermes_protocols import AgentResult, Generation, Message, ParsedTurn, StopReason, ToolCall
from hypothesis import given
from hypothesis import strategies as st

USER = [Message.user("please echo")]


class IdParser:
    """Wraps the Hermes test parser and gives the calls of each parsed turn scripted ids, the
    way Mistral v11+ or Kimi parsers return the ids the model wrote (``None`` = no id)."""

    def __init__(self, inner: Any, ids: Sequence[Sequence[str | None]]) -> None:
        self.inner = inner
        self.ids = [list(turn) for turn in ids]
        self.turn = 0

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        parsed: ParsedTurn = self.inner.parse(text, tools=tools)
        if not parsed.tool_calls:
            return parsed
        given_ids = self.ids[self.turn]
        self.turn += 1
        calls = [attrs.evolve(c, id=i) for c, i in zip(parsed.tool_calls, given_ids, strict=True)]
        return attrs.evolve(parsed, tool_calls=calls)


async def token_rollout(
    kit: Any, tok: HFTokenizer, calls_per_turn: Sequence[int], parser: Any
) -> AgentResult:
    generations = []
    for n_calls in calls_per_turn:
        text = "\n".join(kit.call_text("echo", {"text": f"t{k}"}) for k in range(n_calls))
        ids = [*tok.encode(text), tok.eos_token_id]
        generations.append(Generation(ids, [-0.5] * len(ids), "stop"))
    final = [*tok.encode("done"), tok.eos_token_id]
    generations.append(Generation(final, [-0.5] * len(final), "stop"))
    model = TokenModel(kit.ScriptedTokenBackend(generations), tok, tok.chat_template, parser)
    return await AgentLoop(model).run(USER, tools=[kit.ECHO], executor=kit.RecordingExecutor())


def call_ids(result: AgentResult) -> list[str]:
    return [c.id for m in result.messages for c in m.tool_calls]


def answered_ids(result: AgentResult) -> list[str]:
    return [m.tool_call_id or "" for m in result.messages if m.role == "tool"]


@pytest.mark.anyio
async def test_parser_without_ids_gets_call_turn_index_ids(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    results = [
        await token_rollout(kit, hf_tokenizer, [2, 1, 3], kit.HermesTestParser()) for _ in range(2)
    ]
    expected = ["call_1_0", "call_1_1", "call_2_0", "call_3_0", "call_3_1", "call_3_2"]
    for result in results:
        assert result.stop_reason == StopReason.FINAL_ANSWER
        assert call_ids(result) == expected
        assert answered_ids(result) == expected  # every result answers its own call
    assert results[0].trace == results[1].trace  # same rollout, same ids, same bridge tokens


@pytest.mark.anyio
async def test_model_ids_are_kept_unless_missing_or_taken(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    script = [["abc123xyz", "abc123xyz", None], ["abc123xyz", "q9"]]
    parser = IdParser(kit.HermesTestParser(), script)
    result = await token_rollout(kit, hf_tokenizer, [3, 2], parser)
    expected = ["abc123xyz", "call_1_1", "call_1_2", "call_2_0", "q9"]
    assert call_ids(result) == expected
    assert answered_ids(result) == expected
    assert result.drift is not None
    assert result.drift.mismatches == 0


@pytest.mark.anyio
async def test_chat_mode_empty_or_repeated_server_ids_are_replaced(kit: Any) -> None:
    replies = [
        Message.assistant(
            None,
            (
                ToolCall("", "echo", '{"text": "a"}'),
                ToolCall("srv_1", "echo", '{"text": "b"}'),
                ToolCall("srv_1", "echo", '{"text": "c"}'),
            ),
        ),
        Message.assistant(None, (ToolCall("srv_1", "echo", '{"text": "d"}'),)),
        Message.assistant(None, (ToolCall("srv_2", "echo", '{"text": "e"}'),)),
        Message.assistant("done"),
    ]
    backend = kit.ScriptedChatBackend(replies)
    result = await AgentLoop(ChatModel(backend)).run(
        USER, tools=[kit.ECHO], executor=kit.RecordingExecutor()
    )
    expected = ["call_1_0", "srv_1", "call_1_2", "call_2_0", "srv_2"]
    assert call_ids(result) == expected
    assert answered_ids(result) == expected
    # the server saw the same, consistent ids in the history it was sent
    last_request = backend.requests[-1]
    assert [c.id for m in last_request for c in m.tool_calls] == expected
    assert result.messages[-1] == replies[-1]  # messages without calls are passed through as is


@given(
    st.lists(
        st.lists(st.none() | st.sampled_from(["", "a", "b", "call_1_0", "call_2_1"]), max_size=4),
        max_size=5,
    )
)
def test_call_ids_are_unique_and_deterministic(turns: list[list[str | None]]) -> None:
    def assign_all() -> list[str]:
        ids = CallIds()
        return [
            ids.assign(turn, index, offered)
            for turn, offered_ids in enumerate(turns, start=1)
            for index, offered in enumerate(offered_ids)
        ]

    first = assign_all()
    assert first == assign_all()
    assert len(set(first)) == len(first)
    assert all(first)
    flat = [(t, i, g) for t, ids in enumerate(turns, start=1) for i, g in enumerate(ids)]
    for position, (chosen, (turn, index, offered)) in enumerate(zip(first, flat, strict=True)):
        if offered and offered not in first[:position]:
            assert chosen == offered  # a free id from the model or server is kept
        else:
            assert chosen.startswith(f"call_{turn}_{index}")
