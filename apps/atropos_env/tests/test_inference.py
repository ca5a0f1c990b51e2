"""The ``--openai.*`` namespace -> hermes_loop.ModelSpec mapping and its flags in errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.inference import model_spec, open_model
from hermes_protocols import ConfigError


def _env(tmp_path: Path, **overrides: object) -> HermesAtroposEnvConfig:
    values: dict[str, object] = {"use_wandb": False, "wandb_name": "t", **overrides}
    return HermesAtroposEnvConfig(**values)


def test_extra_body_and_timeout_reach_every_server_type(tmp_path: Path) -> None:
    env = _env(tmp_path, extra_body={"top_k": 5}, max_token_length=1024)
    for kind in ("sglang", "vllm", "llama_cpp", "openai"):
        inference = InferenceConfig(
            server_type=kind, base_url="http://h", tokenizer_name="/t", timeout=33, api_key="k"
        )
        spec = model_spec(env, inference)
        assert spec.extra_body == {"top_k": 5}
        assert spec.timeout_s == 33
        assert spec.context_tokens == 1024
        assert spec.gguf_path is None


def test_embedded_uses_model_path(tmp_path: Path) -> None:
    spec = model_spec(_env(tmp_path), InferenceConfig(model_path="/m/x.gguf"))
    assert (spec.server_type, spec.gguf_path, spec.base_url) == ("embedded", "/m/x.gguf", None)


@pytest.mark.anyio
async def test_vllm_without_model_name_names_the_flag(tmp_path: Path) -> None:
    inference = InferenceConfig(
        server_type="vllm", base_url="http://127.0.0.1:9", tokenizer_name="/t", model_name=""
    )
    with pytest.raises(ConfigError, match=r"--openai\.server_type vllm needs --openai\.model_name"):
        async with open_model(_env(tmp_path), inference):
            pytest.fail("opened without a model name")
