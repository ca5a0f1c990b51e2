"""``open_model``: the right backend per server type, extra_body everywhere, typed fast errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hermes_loop import ChatModel, ModelSpec, TokenModel, check_spec, open_model
from hermes_protocols import BackendError, ConfigError, SamplingParams

SAMPLING = SamplingParams(temperature=0.5, max_tokens=4)
EXTRA = {"seed_marker": 7}
BATCH_NAMES = {
    "base_url": "--model-url",
    "model": "--model",
    "tokenizer": "--tokenizer",
    "server_type": "--server-type",
}


def _sglang_ok(ids: list[int]) -> dict[str, Any]:
    return {
        "text": "x",
        "output_ids": ids,
        "meta_info": {
            "id": "r",
            "finish_reason": {"type": "stop", "matched": ids[-1]},
            "prompt_tokens": 3,
            "completion_tokens": len(ids),
            "output_token_logprobs": [[-0.5, i, None] for i in ids],
        },
    }


def _vllm_ok(ids: list[int]) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": "x",
                "logprobs": {
                    "text_offset": list(range(len(ids))),
                    "token_logprobs": [-0.5] * len(ids),
                    "tokens": [f"token_id:{i}" for i in ids],
                    "top_logprobs": [{f"token_id:{i}": -0.5} for i in ids],
                },
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)},
    }


def _llama_ok(ids: list[int]) -> dict[str, Any]:
    return {
        "content": "x",
        "tokens": ids,
        "stop": True,
        "stop_type": "eos",
        "tokens_predicted": len(ids),
        "tokens_evaluated": 3,
        "completion_probabilities": [
            {"id": i, "token": "x", "bytes": [120], "logprob": -0.5, "top_logprobs": []}
            for i in ids
        ],
    }


# server type, POST path, URL suffix, reply, where extra_body lands in the request body
TOKEN_SERVERS = [
    ("sglang", "/generate", "", _sglang_ok, lambda body: body["sampling_params"]),
    ("vllm", "/v1/completions", "/v1", _vllm_ok, lambda body: body),
    ("llama_cpp", "/completion", "", _llama_ok, lambda body: body),
]


def test_api_key_is_hidden_from_repr() -> None:
    spec = ModelSpec(server_type="openai", base_url="http://x", model="m", api_key="sk-secret")
    assert "sk-secret" not in repr(spec)
    assert "http://x" in repr(spec)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"server_type": "sglang"}, "--server-type sglang needs --model-url"),
        ({"server_type": "openai", "base_url": "http://h"}, "openai needs --model"),
        ({"server_type": "vllm", "base_url": "http://h", "tokenizer": "t"}, "vllm needs --model"),
        ({"server_type": "llama_cpp", "base_url": "http://h"}, "pass --tokenizer DIR"),
    ],
)
def test_missing_options_are_named_with_the_callers_names(
    fields: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        check_spec(ModelSpec(**fields), option_names=BATCH_NAMES)
    with pytest.raises(ConfigError, match=r"ModelSpec\.(base_url|model|tokenizer)"):
        check_spec(ModelSpec(**fields))


def test_bad_values_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="unknown server type 'tgi'"):
        ModelSpec(server_type="tgi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout_s must be > 0"):
        ModelSpec(timeout_s=0)


@pytest.mark.anyio
async def test_unreachable_url_is_a_backend_error_naming_it(kit: Any, parser: Any) -> None:
    url = f"http://127.0.0.1:{kit.free_port()}/v1"
    spec = ModelSpec(server_type="openai", base_url=url, model="m", probe_timeout_s=5)
    with pytest.raises(BackendError, match=f"cannot reach the model server at {url}.*--model-url"):
        async with open_model(spec, parser, option_names=BATCH_NAMES):
            pytest.fail("opened a model on a closed port")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "path", "suffix", "reply", "extra_in"),
    TOKEN_SERVERS,
    ids=[s[0] for s in TOKEN_SERVERS],
)
async def test_token_servers_get_extra_body_api_key_and_the_tokenizer(
    kit: Any,
    parser: Any,
    tokenizer_dir: Path,
    kind: str,
    path: str,
    suffix: str,
    reply: Any,
    extra_in: Any,
) -> None:
    server = kit.ScriptedHTTPServer(path, [kit.json_reply(reply([5, 6]))])
    async with kit.serve(server.app) as url:
        spec = ModelSpec(
            server_type=kind,  # type: ignore[arg-type]
            base_url=url + suffix,
            model="m",
            api_key="sk-1",
            tokenizer=str(tokenizer_dir),
            extra_body=EXTRA,
            timeout_s=5,
            end_token_ids=(2, 0),
        )
        async with open_model(spec, parser) as handle:
            assert isinstance(handle.model, TokenModel)
            assert handle.model.end_token_ids == {0, 2}
            assert handle.tokenizer is handle.model.tokenizer
            assert handle.template is not None
            assert handle.export_hf_tokenizer is None
            assert handle.name == "m"
            generation = await handle.model.backend.generate([1, 2, 3], sampling=SAMPLING)
    assert list(generation.ids) == [5, 6]
    (body,) = server.requests
    assert extra_in(body)["seed_marker"] == 7
    assert server.headers[0]["authorization"] == "Bearer sk-1"


@pytest.mark.anyio
async def test_openai_is_a_chat_model_with_extra_body(
    kit: Any, parser: Any, tokenizer_dir: Path
) -> None:
    server = kit.ScriptedHTTPServer("/v1/chat/completions", [kit.error_reply(500, "unused")])
    async with kit.serve(server.app) as url:
        spec = ModelSpec(
            server_type="openai", base_url=url + "/v1", model="served", extra_body=EXTRA
        )
        async with open_model(spec, parser) as handle:
            assert isinstance(handle.model, ChatModel)
            assert handle.model.extra_body == EXTRA
            assert handle.name == "served"
            assert handle.tokenizer is None
        with_tok = ModelSpec(
            server_type="openai", base_url=url, model="served", tokenizer=str(tokenizer_dir)
        )
        async with open_model(with_tok, parser) as handle:
            assert handle.tokenizer is not None
            assert handle.template is not None


@pytest.mark.slow
@pytest.mark.anyio
async def test_embedded_wires_the_gguf_end_ids_and_the_hf_export(
    parser: Any, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp")
    async with open_model(ModelSpec(context_tokens=512, timeout_s=60), parser) as handle:
        assert isinstance(handle.model, TokenModel)
        assert handle.model.end_token_ids == frozenset({0, 2, 4})  # SmolLM2's declared ids
        assert handle.name.startswith("embedded:")
        assert handle.name.endswith(".gguf")
        assert handle.export_hf_tokenizer is not None
        exported = await handle.export_hf_tokenizer(tmp_path)
        assert (exported / "tokenizer.json").is_file()


@pytest.mark.anyio
async def test_embedded_missing_file_is_a_config_error(parser: Any, tmp_path: Path) -> None:
    spec = ModelSpec(gguf_path=str(tmp_path / "nope.gguf"))
    with pytest.raises(ConfigError, match=r"nope\.gguf"):
        async with open_model(spec, parser):
            pytest.fail("opened a missing model")
