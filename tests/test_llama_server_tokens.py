"""Token mode against a real llama-server (SmolLM2-135M-Instruct, ``--jinja -np 4``).

Checks the sampler-exact path end to end: ids, masks and logprobs equal the server's own
responses, bridges re-render without drift, every end id the server stops on is stripped,
multi-byte characters never lose a rollout, and ``sampled`` logprobs are the tempered
distribution's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from hermes_loop import AgentLoop, HFTokenizer, LoopLimits, ModelSpec, TokenModel, open_model
from hermes_loop.llama_server_backend import LlamaServerBackend
from hermes_parsers import get_parser
from hermes_protocols import Message, SamplingParams, StopReason, ToolResult, ToolSchema

pytestmark = pytest.mark.anyio

ECHO = ToolSchema(
    "echo",
    "Echo the text back.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)
CALL = (
    '<tool_call>\\n{\\"name\\": \\"echo\\", '
    '\\"arguments\\": {\\"text\\": \\"Ѷ hi\\"}}\\n</tool_call>'
)
#: GBNF forcing every turn to be one echo call whose argument holds a multi-byte character
CALL_GRAMMAR = f'root ::= "{CALL}"'
#: GBNF forcing the text "ѶѶ ok": SmolLM2 has no token for Ѷ, so it is spelled in byte tokens
BYTES_GRAMMAR = 'root ::= "ѶѶ ok"'


class Recorder:
    """An httpx client hook keeping every /completion response body the server sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, response: httpx.Response) -> None:
        if response.request.url.path == "/completion":
            await response.aread()
            self.bodies.append(response.json())


def prompt_ids(server: Any, text: str) -> list[int]:
    tokenizer = HFTokenizer.from_directory(server.tokenizer_dir)
    rendered = tokenizer.chat_template.render([Message.user(text)], add_generation_prompt=True)
    return tokenizer.encode(rendered)


async def echo(name: str, arguments: Mapping[str, Any]) -> ToolResult:
    return ToolResult(f"{name}: {json.dumps(dict(arguments), ensure_ascii=False)}")


def spec(server: Any, **extra: Any) -> ModelSpec:
    return ModelSpec(
        server_type="llama_cpp",
        base_url=server.url,
        tokenizer=str(server.tokenizer_dir),
        timeout_s=120,
        **extra,
    )


async def test_rollout_trace_is_the_servers_tokens_and_logprobs(llama_server: Any) -> None:
    recorder = Recorder()
    client = httpx.AsyncClient(base_url=llama_server.url, event_hooks={"response": [recorder]})
    parser = get_parser("hermes")
    async with open_model(spec(llama_server), parser) as handle:
        model = handle.model
        assert isinstance(model, TokenModel)
        backend = LlamaServerBackend(
            llama_server.url, extra_body={"grammar": CALL_GRAMMAR}, client=client
        )
        async with backend:
            token_model = TokenModel(
                backend,
                model.tokenizer,
                model.template,
                parser,
                end_token_ids=model.end_token_ids,
            )
            loop = AgentLoop(
                token_model,
                sampling=SamplingParams(temperature=0.7, max_tokens=96, seed=7),
                limits=LoopLimits(max_turns=2),
            )
            result = await loop.run([Message.user("Echo Ѷ hi.")], tools=[ECHO], executor=echo)
        await client.aclose()
    assert result.stop_reason is StopReason.MAX_TURNS, result.error
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert result.messages[1].tool_calls[0].arguments == '{"text": "Ѷ hi"}'
    trace = result.trace
    assert trace is not None
    assert len(recorder.bodies) == 2
    # trainable runs of the trace are exactly the server's tokens, in order
    runs: list[list[int]] = []
    for index, (token, mask) in enumerate(zip(trace.ids, trace.mask, strict=True)):
        if mask and (index == 0 or not trace.mask[index - 1]):
            runs.append([])
        if mask:
            runs[-1].append(token)
    assert runs == [body["tokens"] for body in recorder.bodies]
    # and each logprob is the server's probability entry (post-sampling, as requested)
    trainable = [i for i, m in enumerate(trace.mask) if m]
    served = []
    for body in recorder.bodies:
        entries = iter(body.get("completion_probabilities", []))
        entry = next(entries, None)
        for token in body["tokens"]:
            if entry is not None and entry["id"] == token:
                served.append(math.log(entry["prob"]))
                entry = next(entries, None)
            else:
                served.append(math.nan)
    recorded = [trace.logprobs[i] for i in trainable]
    assert len(recorded) == len(served)
    for mine, theirs in zip(recorded, served, strict=True):
        assert (math.isnan(mine) and math.isnan(theirs)) or mine == pytest.approx(theirs, abs=1e-6)
    assert trace.missing_logprobs == tuple(i for i in trainable if math.isnan(trace.logprobs[i]))
    assert trace.missing_logprobs, "Ѷ is spelled in byte tokens: some positions have no entry"
    assert trace.logprob_mode == "sampled"
    assert result.metadata["sampling"]["logprob_mode"] == "sampled"
    assert result.metadata["sampling"]["temperature"] == 0.7
    # bridges: re-rendering the whole conversation gives the same tokens
    assert result.drift is not None
    assert result.drift.mismatches == 0, result.drift


@pytest.mark.parametrize("mode", ["sampled", "raw"])
async def test_multibyte_characters_never_lose_a_generation(llama_server: Any, mode: str) -> None:
    async with LlamaServerBackend(
        llama_server.url, extra_body={"grammar": BYTES_GRAMMAR}
    ) as backend:
        sampling = SamplingParams(temperature=0.7, max_tokens=32, seed=3, logprob_mode=mode)  # type: ignore[arg-type]
        generation = await backend.generate(
            prompt_ids(llama_server, "Say ѶѶ ok."), sampling=sampling
        )
    tokenizer = HFTokenizer.from_directory(llama_server.tokenizer_dir)
    assert tokenizer.decode(generation.ids).startswith("ѶѶ ok")
    assert generation.logprob_mode == mode
    assert generation.missing_logprobs
    for position, value in enumerate(generation.logprobs):
        assert math.isnan(value) == (position in generation.missing_logprobs)
        # a missing position is a token after which the text ends inside a character
        if position in generation.missing_logprobs:
            assert tokenizer.decode(generation.ids[: position + 1]).endswith("\ufffd")


async def test_sampled_logprobs_are_the_tempered_distribution(llama_server: Any) -> None:
    prompt = prompt_ids(llama_server, "Name a colour.")
    temperature = 0.6
    raw_sampling = SamplingParams(
        temperature=temperature, max_tokens=3, seed=11, logprob_mode="raw"
    )
    async with LlamaServerBackend(llama_server.url) as backend:
        sampled = await backend.generate(
            prompt, sampling=SamplingParams(temperature=temperature, max_tokens=3, seed=11)
        )
        # the same draw (same seed) with the raw log-softmax of the whole vocabulary
        body = {**backend.request_body(prompt, raw_sampling), "n_probs": 49152}
        data = await backend._http.post("/completion", body)
    assert sampled.logprob_mode == "sampled"
    assert list(sampled.ids) == data["tokens"]
    differs = False
    for position, entry in enumerate(data["completion_probabilities"]):
        scaled = [alt["logprob"] / temperature for alt in entry["top_logprobs"]]
        top = max(scaled)
        normalizer = top + math.log(sum(math.exp(v - top) for v in scaled))
        tempered = entry["logprob"] / temperature - normalizer
        assert sampled.logprobs[position] == pytest.approx(tempered, abs=1e-4)
        differs |= abs(sampled.logprobs[position] - entry["logprob"]) > 1e-3
    assert differs, "at temperature 0.6 the sampled distribution is not the raw one"


async def test_end_ids_come_from_the_server(llama_server: Any) -> None:
    async with LlamaServerBackend(llama_server.url) as backend:
        ids = await backend.end_token_ids()
    assert {0, 2, 4} <= ids


@pytest.mark.parametrize("end_id", [0, 2, 4])
async def test_a_forced_stop_on_each_end_id_is_stripped(llama_server: Any, end_id: int) -> None:
    parser = get_parser("hermes")
    force = {"logit_bias": [[end_id, 100.0]]}
    async with open_model(spec(llama_server, extra_body=force), parser) as handle:
        model = handle.model
        assert isinstance(model, TokenModel)
        assert model.end_token_ids is not None
        assert {0, 2, 4} <= model.end_token_ids
        loop = AgentLoop(model, sampling=SamplingParams(max_tokens=8, seed=1))
        result = await loop.run([Message.user("Say hi.")], tools=[ECHO], executor=echo)
    assert result.stop_reason is StopReason.FINAL_ANSWER, result.error
    assert result.trace is not None
    assert result.trace.ids[-1] == end_id
    assert not result.messages[-1].content  # never '<|endoftext|>' as content
    assert result.drift is not None
    assert result.drift.mismatches == 0
