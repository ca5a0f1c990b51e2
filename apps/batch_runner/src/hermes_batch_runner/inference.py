"""``--server-type`` / ``--model-url`` / ``--model`` -> the agent loop's model.

``embedded`` (the default) runs SmolLM2 in-process in token mode: exact ids, masks and
logprobs. ``openai`` is phase 1 (messages from an OpenAI-compatible server). ``sglang``,
``vllm`` and ``llama_cpp`` are phase 2 token backends over HTTP and need a tokenizer.
A remote server is probed once before the run starts, so an unreachable URL fails in seconds
with the URL named, not after the first rollout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
from hermes_loop import ChatModel, HFTokenizer, TokenModel
from hermes_loop.embedded import EmbeddedModel
from hermes_loop.llama_server_backend import LlamaServerBackend
from hermes_loop.openai_chat import OpenAIChatBackend
from hermes_loop.sglang_backend import SGLangBackend
from hermes_loop.vllm_backend import VLLMBackend
from hermes_protocols import BackendError, ConfigError, ToolCallParser

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials

PROBE_TIMEOUT_S = 10.0


@attrs.frozen(slots=True)
class ModelParts:
    """The loop's model configuration and the model name recorded in trajectories."""

    model: ChatModel | TokenModel
    name: str


def get_parser(name: str) -> ToolCallParser:
    """The tool-call parser ``name``; an unknown name lists the valid ones."""
    import hermes_parsers

    try:
        parser: ToolCallParser = hermes_parsers.get_parser(name)
    except (KeyError, ValueError) as exc:
        raise ConfigError(
            f"unknown --parser {name!r}; known: {', '.join(hermes_parsers.list_parsers())}"
        ) from exc
    return parser


async def probe_server(url: str) -> None:
    """Raise :class:`BackendError` naming ``url`` when nothing answers there."""
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as client:
            await client.get(url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"--model-url {url!r} is not a valid URL: {exc}") from exc
    except httpx.HTTPError as exc:
        raise BackendError(
            f"cannot reach the model server at {url} ({type(exc).__name__}: {exc}); check "
            "--model-url, or omit it to use the embedded model"
        ) from exc


@asynccontextmanager
async def open_model(config: RunConfig, credentials: Credentials) -> AsyncIterator[ModelParts]:
    """Start (and on exit release) the model the config names."""
    if config.server_type == "embedded":
        async with _embedded(config) as parts:
            yield parts
        return
    url = config.model_url
    assert url is not None  # RunConfig checks it
    await probe_server(url)
    if config.server_type == "openai":
        if not config.model:
            raise ConfigError("--server-type openai needs --model (the served model's name)")
        async with OpenAIChatBackend(
            url, model=config.model, api_key=credentials.api_key, timeout_s=config.rollout_timeout
        ) as chat:
            yield ModelParts(ChatModel(chat, extra_body=config.extra_body), config.model)
        return
    if not config.tokenizer:
        raise ConfigError(
            f"--server-type {config.server_type} is token mode: pass --tokenizer DIR (the "
            "served model's Hugging Face tokenizer directory)"
        )
    tokenizer = await HFTokenizer.load(config.tokenizer)
    options: dict[str, Any] = {"api_key": credentials.api_key, "timeout_s": config.rollout_timeout}
    backend: SGLangBackend | VLLMBackend | LlamaServerBackend
    if config.server_type == "sglang":
        backend = SGLangBackend(url, extra_sampling=config.extra_body, **options)
    elif config.server_type == "vllm":
        if not config.model:
            raise ConfigError("--server-type vllm needs --model (the served model's name)")
        backend = VLLMBackend(url, model=config.model, extra_body=config.extra_body, **options)
    else:
        backend = LlamaServerBackend(url, extra_body=config.extra_body, **options)
    async with backend:
        model = TokenModel(backend, tokenizer, tokenizer.chat_template, get_parser(config.parser))
        yield ModelParts(model, config.model or f"{config.server_type}:{url}")


@asynccontextmanager
async def _embedded(config: RunConfig) -> AsyncIterator[ModelParts]:
    """SmolLM2 (or ``--model FILE.gguf``) in-process, in token mode."""
    parser = get_parser(config.parser)
    async with await EmbeddedModel.open(
        config.model, n_ctx=config.context_tokens, timeout_s=config.rollout_timeout
    ) as embedded:
        model = TokenModel(embedded.backend, embedded.tokenizer, embedded.template, parser)
        yield ModelParts(model, f"embedded:{embedded.path.name}")
