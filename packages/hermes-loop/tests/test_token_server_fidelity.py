"""Issue 16 without a server: token alignment, logprob modes, end ids, the phase-1 check."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from hermes_loop import AgentLoop, ChatModel, LoopLimits, ModelSpec, TokenModel, open_model
from hermes_loop.end_ids import directory_end_ids, resolve_end_ids
from hermes_loop.engine import EXACT_LLAMA_SERVER_FLAGS, embedded_engine
from hermes_loop.llama_server_backend import (
    LlamaServerBackend,
    align_entries,
    parse_completion_response,
    utf8_complete,
)
from hermes_loop.sglang_backend import SGLangBackend
from hermes_loop.vllm_backend import VLLMBackend
from hermes_protocols import (
    BackendError,
    ChatChoice,
    ChatResult,
    Generation,
    Message,
    SamplingParams,
    StopReason,
    ToolCall,
    Usage,
)
from hypothesis import given
from hypothesis import strategies as st


def llama_body(tokens: list[int], entries: list[tuple[int, float]], *, prob: bool) -> Any:
    key = "prob" if prob else "logprob"
    return {
        "tokens": tokens,
        "stop_type": "eos",
        "truncated": False,
        "completion_probabilities": [{"id": i, key: v, "token": "x"} for i, v in entries],
    }


def test_a_token_without_a_probability_entry_keeps_its_id_and_is_reported() -> None:
    # the case: 'Ѷ' as two byte tokens; the first ends inside the character
    body = llama_body([300, 208, 182, 2], [(300, -0.5), (182, -0.25), (2, -0.125)], prob=False)
    generation = parse_completion_response(body)
    assert generation.ids == (300, 208, 182, 2)
    assert generation.missing_logprobs == (1,)
    assert math.isnan(generation.logprobs[1])
    assert generation.logprobs[0] == -0.5
    assert generation.logprobs[2:] == (-0.25, -0.125)
    assert generation.logprob_mode == "raw"


def test_no_entries_at_all_is_every_position_missing() -> None:
    body = llama_body([208, 182], [], prob=True)
    del body["completion_probabilities"]  # llama-server omits the key when the list is empty
    generation = parse_completion_response(body)
    assert generation.missing_logprobs == (0, 1)


def test_post_sampling_probabilities_become_sampled_logprobs() -> None:
    generation = parse_completion_response(llama_body([5, 6], [(5, 0.5), (6, 1.0)], prob=True))
    assert generation.logprobs == (math.log(0.5), 0.0)
    assert generation.logprob_mode == "sampled"


def test_entries_that_are_not_a_subsequence_are_an_error() -> None:
    with pytest.raises(BackendError, match="not a subsequence"):
        parse_completion_response(llama_body([5, 6], [(6, -1.0), (5, -1.0)], prob=False))


def test_a_repeated_id_is_never_given_another_positions_entry() -> None:
    # E2 9C 93: the first two bytes end inside the character, only the last has an entry
    assert align_entries([0xE2, 0x9C, 0x93], [0x93]) == [None, None, 0]
    # E2 80 80: the entry's id fits two positions; it is recorded missing, never misplaced
    assert align_entries([0xE2, 0x80, 0x80], [0x80]) == [None, None, None]
    # C2 80 then E2 80 80: which 0x80 each entry belongs to is ambiguous, so none is placed
    assert align_entries([0xC2, 0x80, 0xE2, 0x80, 0x80], [0x80, 0x80]) == [None] * 5


def _byte_ids(pieces: list[bytes]) -> list[int]:
    return [piece[0] for piece in pieces]  # one-byte pieces: the id is the byte


def test_the_servers_utf8_rule_places_a_repeated_byte_tokens_entry() -> None:
    # issue 31: E2 80 80: only the second 0x80 completes the character, so it has the entry
    pieces = [b"\xe2", b"\x80", b"\x80"]
    assert utf8_complete(pieces) == [False, False, True]
    assert align_entries(_byte_ids(pieces), [0x80], utf8_complete(pieces)) == [None, None, 0]
    pieces = [b"\xc2", b"\x80", b"\xe2", b"\x80", b"\x80"]
    placed = align_entries(_byte_ids(pieces), [0x80, 0x80], utf8_complete(pieces))
    assert placed == [None, 0, None, None, 1]


def test_parsing_with_token_bytes_recovers_the_logprob_of_a_repeated_byte_token() -> None:
    body = llama_body([0xC2, 0x80, 0xE2, 0x80, 0x80], [(0x80, -0.5), (0x80, -0.25)], prob=False)
    unknown = parse_completion_response(body)
    assert unknown.missing_logprobs == (0, 1, 2, 3, 4)
    generation = parse_completion_response(body, token_bytes=lambda token: bytes([token]))
    assert generation.missing_logprobs == (0, 2, 3)
    assert (generation.logprobs[1], generation.logprobs[4]) == (-0.5, -0.25)


def test_a_stop_the_bytes_do_not_model_falls_back_to_the_sure_placements() -> None:
    # the entries do not fit the rule (here: an entry at an incomplete position), so the
    # placement is the id-only one: nothing is placed on a guess
    body = llama_body([0xE2, 0x80, 0x80], [(0xE2, -1.0), (0x80, -0.5)], prob=False)
    generation = parse_completion_response(body, token_bytes=lambda token: bytes([token]))
    assert generation.missing_logprobs == (1, 2)


@given(st.text(min_size=1, max_size=12), st.data())
def test_with_bytes_every_entry_the_server_sends_is_placed(text: str, data: st.DataObject) -> None:
    raw = text.encode("utf-8")
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1))) if len(raw) > 1 else set())
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    ids = {piece: index for index, piece in enumerate(dict.fromkeys(pieces))}
    tokens = [ids[piece] for piece in pieces]
    complete = utf8_complete(pieces)
    sent = [p for p in range(len(pieces)) if complete[p]]  # where llama-server adds an entry
    placed = align_entries(tokens, [tokens[p] for p in sent], complete)
    assert [p for p, index in enumerate(placed) if index is not None] == sent
    assert complete[-1]  # valid UTF-8 ends complete


def test_hf_token_bytes_spell_the_text(hf_tokenizer: Any) -> None:
    text = "Ѷ€ hi 耀 ok"
    ids = hf_tokenizer.encode(text)
    assert b"".join(hf_tokenizer.token_bytes(token) for token in ids) == text.encode("utf-8")
    assert hf_tokenizer.token_bytes(hf_tokenizer.eos_token_id) == b""  # special: no text


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_alignment_places_only_entries_it_is_sure_of(tokens: list[int], keep: list[bool]) -> None:
    kept = [i for i in range(len(tokens)) if keep[i]]
    placed = align_entries(tokens, [tokens[i] for i in kept])
    for position, index in enumerate(placed):
        if index is not None:
            assert kept[index] == position  # never another position's value
    assert sum(index is not None for index in placed) <= len(kept)


def test_llama_server_requests_post_sampling_probs_for_the_sampled_mode() -> None:
    backend = LlamaServerBackend("http://127.0.0.1:1")
    sampled = backend.request_body([1], SamplingParams())
    raw = backend.request_body([1], SamplingParams(logprob_mode="raw"))
    assert sampled["post_sampling_probs"] is True
    assert raw["post_sampling_probs"] is False


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make", "path", "reply"),
    [
        (
            lambda url: VLLMBackend(url + "/v1", model="m"),
            "/v1/completions",
            {
                "choices": [
                    {
                        "logprobs": {"tokens": ["token_id:3"], "token_logprobs": [-0.5]},
                        "finish_reason": "stop",
                    }
                ]
            },
        ),
        (
            lambda url: SGLangBackend(url, logprob_mode="raw"),
            "/generate",
            {
                "output_ids": [3],
                "meta_info": {
                    "output_token_logprobs": [[-0.5, 3, None]],
                    "finish_reason": {"type": "stop"},
                },
            },
        ),
    ],
    ids=["vllm", "sglang"],
)
async def test_an_engine_without_the_requested_mode_warns_once_and_says_so(
    kit: Any, caplog: pytest.LogCaptureFixture, make: Any, path: str, reply: Any
) -> None:
    server = kit.ScriptedHTTPServer(path, [kit.json_reply(reply)])
    async with kit.serve(server.app) as url, make(url) as backend:
        with caplog.at_level(logging.WARNING, logger="hermes_loop.logprobs"):
            first = await backend.generate([1], sampling=SamplingParams(temperature=0.7))
            second = await backend.generate([1], sampling=SamplingParams(temperature=0.7))
    assert first.logprob_mode == second.logprob_mode == "raw"
    warnings = [r for r in caplog.records if "sampled were requested" in r.getMessage()]
    assert len(warnings) == 1


def test_end_ids_from_generation_config_and_override(tmp_path: Path, hf_tokenizer: Any) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 2, 4]}))
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 7}))
    assert directory_end_ids(tmp_path) == {0, 2, 4, 7}
    template = hf_tokenizer.chat_template
    found = resolve_end_ids(hf_tokenizer, template, server=[9], directory=tmp_path)
    assert {0, 2, 4, 7, 9, hf_tokenizer.eos_token_id} <= found
    assert resolve_end_ids(hf_tokenizer, template, override=[4], server=[9]) == {4}


@pytest.mark.anyio
async def test_factory_reads_llama_server_end_ids(
    kit: Any, parser: Any, tokenizer_dir: Path
) -> None:
    settings = {"logit_bias": [{"bias": None, "token": 0}, {"bias": None, "token": 4}]}
    reply = {"tokens": [], "stop_type": "limit", "generation_settings": settings}
    server = kit.ScriptedHTTPServer("/completion", [kit.json_reply(reply)])
    async with kit.serve(server.app) as url:
        spec = ModelSpec(server_type="llama_cpp", base_url=url, tokenizer=str(tokenizer_dir))
        async with open_model(spec, parser) as handle:
            model = handle.model
            assert isinstance(model, TokenModel)
            assert model.end_token_ids is not None
            assert {0, 4} <= model.end_token_ids
            # issue 31: records say what reproduces a llama-server's logprobs
            assert model.engine is not None
            assert model.engine["name"] == "llama-server"
            assert " ".join(EXACT_LLAMA_SERVER_FLAGS) in str(model.engine["reproduced_by"])
    (request,) = server.requests
    assert request["ignore_eos"] is True


@pytest.mark.anyio
async def test_an_end_id_other_than_eos_never_reaches_the_content(
    kit: Any, hf_tokenizer: Any, parser: Any
) -> None:
    text_ids = hf_tokenizer.encode("done")
    other_end = hf_tokenizer.encode("!")[0]  # an id the server stops on, not the tokenizer's EOS
    generation = Generation([*text_ids, other_end], [-0.1] * (len(text_ids) + 1), "stop")
    backend = kit.ScriptedTokenBackend([generation])
    model = TokenModel(
        backend,
        hf_tokenizer,
        hf_tokenizer.chat_template,
        parser,
        end_token_ids={hf_tokenizer.eos_token_id, other_end},
        engine=embedded_engine(16, "0.3.36+hermes.1"),
    )
    result = await AgentLoop(model).run(
        [Message.user("hi")], tools=[], executor=kit.RecordingExecutor()
    )
    assert result.messages[-1].content == "done"
    assert result.metadata["sampling"]["logprob_mode"] == "raw"
    assert result.metadata["sampling"]["logprob_mode_requested"] == "sampled"
    engine = result.metadata["sampling"]["engine"]  # issue 31: every record names its numerics
    assert engine["kv_cache_type"] == "q8_0"
    assert engine["n_ubatch"] == 16
    assert "-ub 16 -fa on -ctk q8_0 -ctv q8_0" in engine["reproduced_by"]


def _markup_reply(kit: Any) -> Message:
    return Message.assistant(kit.call_text("echo", {"text": "hi"}))


@pytest.mark.anyio
async def test_phase1_says_once_when_the_server_ignores_tools(
    kit: Any, parser: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend = kit.ScriptedChatBackend([_markup_reply(kit)] * 4)
    model = ChatModel(backend, parser=parser)
    with caplog.at_level(logging.WARNING, logger="hermes_loop.ignored_tools"):
        for _ in range(4):
            result = await AgentLoop(model, limits=LoopLimits(max_turns=1)).run(
                [Message.user("hi")], tools=[kit.ECHO], executor=kit.RecordingExecutor()
            )
            assert result.stop_reason is StopReason.FINAL_ANSWER
    warnings = [r for r in caplog.records if "evidently ignores `tools`" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.anyio
async def test_phase1_server_tool_calls_mean_no_warning(
    kit: Any, parser: Any, caplog: pytest.LogCaptureFixture
) -> None:
    called = Message.assistant(None, (ToolCall("c1", "echo", '{"text": "hi"}'),))
    backend = kit.ScriptedChatBackend([called, *[_markup_reply(kit)] * 4])
    model = ChatModel(backend, parser=parser)
    with caplog.at_level(logging.WARNING, logger="hermes_loop.ignored_tools"):
        for _ in range(5):
            await AgentLoop(model, limits=LoopLimits(max_turns=1)).run(
                [Message.user("hi")], tools=[kit.ECHO], executor=kit.RecordingExecutor()
            )
    assert not [r for r in caplog.records if "ignores" in r.getMessage()]


@pytest.mark.anyio
async def test_phase1_parses_content_when_asked(kit: Any, parser: Any) -> None:
    backend = kit.ScriptedChatBackend([_markup_reply(kit), Message.assistant("done")])
    executor = kit.RecordingExecutor()
    model = ChatModel(backend, parser=parser, parse_content=True)
    result = await AgentLoop(model).run([Message.user("hi")], tools=[kit.ECHO], executor=executor)
    assert executor.calls == [("echo", {"text": "hi"})]
    assert result.messages[1].tool_calls[0].name == "echo"
    assert result.stop_reason is StopReason.FINAL_ANSWER


class CountingChat:
    """A chat server that counts ``per_tool`` prompt tokens for each tool it renders."""

    def __init__(self, per_tool: int, *, usage: bool = True) -> None:
        self.per_tool = per_tool
        self.usage = usage
        self.offered: list[int] = []

    async def chat(
        self, messages: Any, *, tools: Any, sampling: Any, n: int = 1, extra_body: Any = None
    ) -> ChatResult:
        self.offered.append(len(tools))
        prompt = 20 + self.per_tool * len(tools) if self.usage else 0
        return ChatResult([ChatChoice(Message.assistant("OK"), "stop")], Usage(prompt, 1))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("per_tool", "usage", "found"), [(0, True, False), (40, True, True), (0, False, None)]
)
async def test_phase1_warns_once_when_the_server_drops_tools_from_the_prompt(
    kit: Any, caplog: pytest.LogCaptureFixture, per_tool: int, usage: bool, found: bool | None
) -> None:
    backend = CountingChat(per_tool, usage=usage)
    with caplog.at_level(logging.WARNING, logger="hermes_loop.ignored_tools"):
        assert await ChatModel(backend).check_tools([kit.ECHO]) is found
    assert backend.offered == [1, 0]  # one request with the tools, one without
    warnings = [r.getMessage() for r in caplog.records if "drops `tools`" in r.getMessage()]
    assert len(warnings) == (1 if found is False else 0)
    assert all("--jinja" in w and "\n" not in w for w in warnings)
