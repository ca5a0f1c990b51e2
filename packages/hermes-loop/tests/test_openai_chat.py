"""OpenAI-compatible chat backend against a local server speaking /v1/chat/completions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hermes_loop import AgentLoop, ChatModel, OpenAIChatBackend, RetryPolicy
from hermes_protocols import (
    BackendError,
    Message,
    SamplingParams,
    StopReason,
    ToolCall,
    Usage,
)

FAST = RetryPolicy(attempts=3, base_s=0.01, max_s=0.05)


def completion(*messages: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": i, "message": m, "finish_reason": finish, "logprobs": None}
            for i, m in enumerate(messages)
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


async def chat(kit: Any, replies: list[Any], **kwargs: Any) -> tuple[Any, Any]:
    server = kit.ScriptedHTTPServer("/v1/chat/completions", replies)
    async with (
        kit.serve(server.app) as url,
        OpenAIChatBackend(
            url + "/v1",
            model="m",
            api_key="sk-test",
            retry=FAST,
            extra_body={"provider": {"order": ["a", "b"]}},
        ) as backend,
    ):
        try:
            result = await backend.chat(
                [Message.user("hi")],
                tools=[kit.ECHO],
                sampling=SamplingParams(temperature=0.5, max_tokens=64, seed=3),
                **kwargs,
            )
        except BackendError as exc:
            result = exc
    return result, server


@pytest.mark.anyio
async def test_request_shape_extra_body_and_tool_calls(kit: Any) -> None:
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "x"}'},
            }
        ],
    }
    result, server = await chat(
        kit,
        [kit.json_reply(completion(reply, reply, finish="tool_calls"))],
        n=2,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    (body,) = server.requests
    assert body["model"] == "m"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"][0]["function"]["name"] == "echo"
    assert (body["n"], body["max_tokens"], body["temperature"], body["seed"]) == (2, 64, 0.5, 3)
    assert body["provider"] == {"order": ["a", "b"]}  # backend-level extra_body, untouched
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # per-call extra_body
    assert len(result.choices) == 2
    assert result.choices[0].message.tool_calls == (ToolCall("call_1", "echo", '{"text": "x"}'),)
    assert result.choices[0].finish_reason == "tool_calls"
    assert result.usage == Usage(12, 3)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("reasoning_content", "step by step", "step by step"),
        ("reasoning", "thinking", "thinking"),
        (
            "reasoning_details",
            [
                {"type": "reasoning.text", "text": "first"},
                {"type": "reasoning.encrypted", "data": "xxx"},
                {"type": "reasoning.summary", "summary": "second"},
            ],
            "first\nsecond",
        ),
    ],
)
async def test_reasoning_fields(kit: Any, field: str, value: Any, expected: str) -> None:
    reply = {"role": "assistant", "content": "answer", field: value}
    result, _ = await chat(kit, [kit.json_reply(completion(reply))])
    assert result.choices[0].message == Message.assistant("answer", reasoning=expected)


@pytest.mark.anyio
async def test_retries_then_succeeds_and_sends_the_key(kit: Any) -> None:
    ok = completion({"role": "assistant", "content": "ok"})
    replies = [
        kit.error_reply(429, "rate limited"),
        kit.error_reply(502, "bad gw"),
        kit.json_reply(ok),
    ]
    result, server = await chat(kit, replies)
    assert result.choices[0].message.content == "ok"
    assert len(server.requests) == 3
    assert all(h["authorization"] == "Bearer sk-test" for h in server.headers)


@pytest.mark.anyio
async def test_errors(kit: Any) -> None:
    result, server = await chat(kit, [kit.error_reply(401, "bad key")])
    assert isinstance(result, BackendError)
    assert "401: bad key" in str(result)
    assert len(server.requests) == 1
    result, _ = await chat(kit, [kit.json_reply({"choices": []})])
    assert isinstance(result, BackendError)
    bad_call = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "echo", "arguments": {}}}],
    }
    result, _ = await chat(kit, [kit.json_reply(completion(bad_call))])
    assert isinstance(result, BackendError)
    assert "JSON string" in str(result)


@pytest.mark.anyio
async def test_agent_loop_in_chat_mode_over_http(kit: Any) -> None:
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "echo", "arguments": "{bad"}},
            {
                "id": "b",
                "type": "function",
                "function": {"name": "echo", "arguments": json.dumps({"text": "y"})},
            },
        ],
    }
    replies = [
        kit.json_reply(completion(call, finish="tool_calls")),
        kit.json_reply(completion({"role": "assistant", "content": "bye"})),
    ]
    server = kit.ScriptedHTTPServer("/v1/chat/completions", replies)
    executor = kit.RecordingExecutor()
    async with (
        kit.serve(server.app) as url,
        OpenAIChatBackend(url + "/v1", model="m", retry=FAST) as backend,
    ):
        result = await AgentLoop(ChatModel(backend)).run(
            [Message.user("go")], tools=[kit.ECHO], executor=executor
        )
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert executor.calls == [("echo", {"text": "y"})]
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[2]["tool_call_id"] == "a"
    assert "not valid JSON" in sent[2]["content"]
    assert sent[3]["content"] == 'echo:{"text": "y"}'
