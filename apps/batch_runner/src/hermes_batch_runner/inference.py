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
from pathlib import Path

import attrs
import httpx
from hermes_loop import ChatModel, TokenModel
from hermes_loop.openai_chat import OpenAIChatBackend
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
    assert config.model_url is not None  # RunConfig checks it
    await probe_server(config.model_url)
    if config.server_type == "openai":
        if not config.model:
            raise ConfigError("--server-type openai needs --model (the served model's name)")
        async with OpenAIChatBackend(
            config.model_url,
            model=config.model,
            api_key=credentials.api_key,
            timeout_s=config.rollout_timeout,
        ) as backend:
            yield ModelParts(ChatModel(backend, extra_body=config.extra_body), config.model)
        return
    raise ConfigError(
        f"--server-type {config.server_type} (token mode over HTTP) is not wired into the "
        "batch runner yet; use --server-type openai or the embedded model"
    )


@asynccontextmanager
async def _embedded(config: RunConfig) -> AsyncIterator[ModelParts]:
    from hermes_loop.embedded.model_file import resolve_model_path

    path: Path = resolve_model_path(config.model)
    if path.suffix:
        raise ConfigError(f"the embedded model backend is not available yet ({path})")
    yield ModelParts(ChatModel(None), "none")  # type: ignore[arg-type]
