"""The run config -> hermes_loop.ModelSpec mapping and this CLI's flags in factory errors."""

from __future__ import annotations

import pytest
from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials
from hermes_batch_runner.inference import model_spec, open_model
from hermes_protocols import ConfigError


def test_embedded_model_flag_is_the_gguf_file() -> None:
    spec = model_spec(RunConfig(model="/m/x.gguf", rollout_timeout=42), Credentials(api_key="k"))
    assert spec.server_type == "embedded"
    assert spec.gguf_path == "/m/x.gguf"
    assert spec.model is None
    assert spec.timeout_s == 42


def test_server_flags_map_onto_the_spec() -> None:
    config = RunConfig(
        server_type="vllm", model_url="http://h/v1", model="m", tokenizer="/t", extra_body={"a": 1}
    )
    spec = model_spec(config, Credentials(api_key="sk"))
    assert (spec.base_url, spec.model, spec.tokenizer, spec.api_key) == (
        "http://h/v1",
        "m",
        "/t",
        "sk",
    )
    assert spec.extra_body == {"a": 1}
    assert spec.gguf_path is None


@pytest.mark.anyio
async def test_a_token_server_without_tokenizer_names_the_flag() -> None:
    config = RunConfig(server_type="sglang", model_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="--server-type sglang is token mode: pass --tokenizer"):
        async with open_model(config, Credentials()):
            pytest.fail("opened without a tokenizer")
