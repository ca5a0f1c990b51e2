"""SGLang, vLLM and llama-server token backends against local servers speaking each wire shape."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hermes_loop import (
    AgentLoop,
    HFTokenizer,
    LlamaServerBackend,
    RetryPolicy,
    SGLangBackend,
    TokenModel,
    VLLMBackend,
)
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    Generation,
    Message,
    SamplingParams,
    StopReason,
    TokenBackend,
)

FAST = RetryPolicy(attempts=3, base_s=0.01, max_s=0.05)


def sglang_ok(ids: list[int], lps: list[float], finish: str) -> dict[str, Any]:
    reason = (
        {"type": "length", "length": len(ids)}
        if finish == "length"
        else {
            "type": "stop",
            "matched": ids[-1] if ids else None,
        }
    )
    return {
        "text": "decoded",
        "output_ids": ids,
        "meta_info": {
            "id": "req-1",
            "finish_reason": reason,
            "prompt_tokens": 7,
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "output_token_logprobs": [[lp, i, None] for i, lp in zip(ids, lps, strict=True)],
            "e2e_latency": 0.01,
        },
    }


def sglang_request(body: dict[str, Any], prompt: list[int], sampling: SamplingParams) -> None:
    assert body["input_ids"] == prompt
    assert body["return_logprob"] is True
    params = body["sampling_params"]
    assert params["max_new_tokens"] == sampling.max_tokens
    assert params["temperature"] == sampling.temperature
    assert params["skip_special_tokens"] is False


def vllm_ok(ids: list[int], lps: list[float], finish: str) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": "decoded",
                "logprobs": {
                    "text_offset": list(range(len(ids))),
                    "token_logprobs": lps,
                    "tokens": [f"token_id:{i}" for i in ids],
                    "top_logprobs": [{f"token_id:{i}": lp} for i, lp in zip(ids, lps, strict=True)],
                },
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": len(ids), "total_tokens": 7 + len(ids)},
    }


def vllm_request(body: dict[str, Any], prompt: list[int], sampling: SamplingParams) -> None:
    assert body["model"] == "m"
    assert body["prompt"] == prompt
    assert body["max_tokens"] == sampling.max_tokens
    assert body["logprobs"] == 1
    assert body["return_tokens_as_token_ids"] is True


def llama_ok(ids: list[int], lps: list[float], finish: str) -> dict[str, Any]:
    return {
        "index": 0,
        "content": "decoded",
        "tokens": ids,
        "id_slot": 0,
        "stop": True,
        "model": "gguf",
        "tokens_predicted": len(ids),
        "tokens_evaluated": 7,
        "generation_settings": {"n_predict": 16},
        "prompt": "",
        "has_new_line": False,
        "truncated": False,
        "stop_type": "eos" if finish == "stop" else "limit",
        "stopping_word": "",
        "tokens_cached": 0,
        "timings": {},
        "completion_probabilities": [
            {
                "id": i,
                "token": "x",
                "bytes": [120],
                "logprob": lp,
                "top_logprobs": [{"id": i, "token": "x", "bytes": [120], "logprob": lp}],
            }
            for i, lp in zip(ids, lps, strict=True)
        ],
    }


def llama_request(body: dict[str, Any], prompt: list[int], sampling: SamplingParams) -> None:
    assert body["prompt"] == prompt
    assert body["n_predict"] == sampling.max_tokens
    assert body["n_probs"] >= 1
    assert body["return_tokens"] is True
    assert body["min_p"] == 0.0


@attrs.frozen
class Engine:
    name: str
    path: str
    make: Callable[[str, Any], TokenBackend]
    ok: Callable[[list[int], list[float], str], dict[str, Any]]
    check: Callable[[dict[str, Any], list[int], SamplingParams], None]
    inconsistent: Callable[[], dict[str, Any]]
    mode: str


def _sglang_bad() -> dict[str, Any]:
    data = sglang_ok([5, 6, 7], [-1.0, -2.0, -3.0], "stop")
    data["output_ids"] = [5, 6]
    return data


def _vllm_bad() -> dict[str, Any]:
    data = vllm_ok([5, 6, 7], [-1.0, -2.0, -3.0], "stop")
    data["choices"][0]["logprobs"]["tokens"].pop()
    return data


def _llama_bad() -> dict[str, Any]:
    data = llama_ok([5, 6, 7], [-1.0, -2.0, -3.0], "stop")
    data["completion_probabilities"][1]["id"] = 9  # an entry for a token never generated
    return data


ENGINES = [
    Engine(
        "sglang",
        "/generate",
        lambda url, opts: SGLangBackend(url, **opts),
        sglang_ok,
        sglang_request,
        _sglang_bad,
        "sampled",
    ),
    Engine(
        "vllm",
        "/v1/completions",
        lambda url, opts: VLLMBackend(url + "/v1", model="m", **opts),
        vllm_ok,
        vllm_request,
        _vllm_bad,
        "raw",
    ),
    Engine(
        "llama-server",
        "/completion",
        lambda url, opts: LlamaServerBackend(url, **opts),
        llama_ok,
        llama_request,
        _llama_bad,
        "raw",
    ),
]
engines = pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
SAMPLING = SamplingParams(temperature=0.7, max_tokens=16)
PROMPT = [1, 20, 30, 2]


async def generate(kit: Any, engine: Engine, replies: list[Any], **opts: Any) -> Any:
    server = kit.ScriptedHTTPServer(engine.path, replies)
    async with kit.serve(server.app) as url:
        options = {"retry": FAST, **opts}
        backend: Any = engine.make(url, options)
        async with backend:
            try:
                return await backend.generate(PROMPT, sampling=SAMPLING), server
            except BackendError as exc:
                return exc, server


@pytest.mark.anyio
@engines
@pytest.mark.parametrize("finish", ["stop", "length"])
async def test_generation_round_trip(kit: Any, engine: Engine, finish: str) -> None:
    ids, lps = [11, 12, 2], [-0.25, -1.5, -0.125]
    result, server = await generate(kit, engine, [kit.json_reply(engine.ok(ids, lps, finish))])
    assert result == Generation(ids, lps, finish, logprob_mode=engine.mode)  # type: ignore[arg-type]
    (request,) = server.requests
    engine.check(request, PROMPT, SAMPLING)


@pytest.mark.anyio
@engines
async def test_retries_5xx_429_and_dropped_connections(kit: Any, engine: Engine) -> None:
    ok = engine.ok([3], [-0.5], "stop")
    replies = [
        kit.error_reply(503, "overloaded"),
        kit.drop_reply(ok),
        kit.error_reply(429, "slow down", {"retry-after": "0"}),
        kit.json_reply(ok),
    ]
    result, server = await generate(
        kit, engine, replies, retry=RetryPolicy(attempts=4, base_s=0.01, max_s=0.05)
    )
    assert result == Generation([3], [-0.5], "stop", logprob_mode=engine.mode)  # type: ignore[arg-type]
    assert len(server.requests) == 4


@pytest.mark.anyio
@engines
async def test_client_error_is_not_retried(kit: Any, engine: Engine) -> None:
    result, server = await generate(kit, engine, [kit.error_reply(400, "prompt too long")])
    assert isinstance(result, BackendError)
    assert "HTTP 400: prompt too long" in str(result)
    assert len(server.requests) == 1


@pytest.mark.anyio
@engines
async def test_gives_up_after_attempts(kit: Any, engine: Engine) -> None:
    result, server = await generate(kit, engine, [kit.drop_reply(engine.ok([1], [-1.0], "stop"))])
    assert isinstance(result, BackendError)
    assert "after 3 attempts" in str(result)
    assert len(server.requests) == 3


@pytest.mark.anyio
@engines
async def test_truncated_or_inconsistent_bodies_are_errors(kit: Any, engine: Engine) -> None:
    text = '{"choices": [{"text": "ab'
    result, _ = await generate(kit, engine, [kit.raw_reply(text)])
    assert isinstance(result, BackendError)
    assert "not valid JSON" in str(result)
    result, _ = await generate(kit, engine, [kit.json_reply(engine.inconsistent())])
    assert isinstance(result, BackendError)
    assert "truncated" in str(result) or "inconsistent" in str(result)
    result, _ = await generate(kit, engine, [kit.json_reply({"unexpected": True})])
    assert isinstance(result, BackendError)


@pytest.mark.anyio
@engines
async def test_request_timeout_is_typed(kit: Any, engine: Engine) -> None:
    started = time.perf_counter()
    reply = kit.slow_reply(5, engine.ok([1], [-1.0], "stop"))
    result, _ = await generate(kit, engine, [reply], timeout_s=0.2)
    assert isinstance(result, BackendTimeout)
    assert time.perf_counter() - started < 3


@pytest.mark.anyio
@engines
async def test_connection_refused_after_retries(kit: Any, engine: Engine) -> None:
    backend: Any = engine.make(f"http://127.0.0.1:{kit.free_port()}", {"retry": FAST})
    async with backend:
        with pytest.raises(BackendError, match="after 3 attempts: ConnectError"):
            await backend.generate(PROMPT, sampling=SAMPLING)


@pytest.mark.anyio
@engines
async def test_agent_loop_over_http(kit: Any, engine: Engine, hf_tokenizer: HFTokenizer) -> None:
    tok = hf_tokenizer
    call = [*tok.encode(kit.call_text("echo", {"text": "hi"})), tok.eos_token_id]
    answer = [*tok.encode("done"), tok.eos_token_id]
    replies = [
        kit.json_reply(engine.ok(call, [-0.5] * len(call), "stop")),
        kit.json_reply(engine.ok(answer, [-0.25] * len(answer), "stop")),
    ]
    server = kit.ScriptedHTTPServer(engine.path, replies)
    async with kit.serve(server.app) as url:
        backend: Any = engine.make(url, {"retry": FAST})
        async with backend:
            model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
            executor = kit.RecordingExecutor()
            result = await AgentLoop(model).run(
                [Message.user("hi")], tools=[kit.ECHO], executor=executor
            )
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert executor.calls == [("echo", {"text": "hi"})]
    assert result.trace is not None
    assert result.trace.num_trainable == len(call) + len(answer)
    prompts = [r.get("input_ids", r.get("prompt")) for r in server.requests]
    assert prompts[1][: len(prompts[0]) + len(call)] == prompts[0] + call
    assert list(result.trace.ids) == prompts[1] + answer
    assert result.drift is not None
    assert not result.drift.drifted
