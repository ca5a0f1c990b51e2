"""``--server-type`` / ``--model-url`` / ``--model`` -> the agent loop's model.

The backends are built by :func:`hermes_loop.open_model`; this module maps the run config onto
a :class:`hermes_loop.ModelSpec` and names this CLI's flags in its errors. ``embedded`` (the
default) runs SmolLM2 (or ``--model FILE.gguf``) in-process in token mode; ``openai`` is
phase 1; ``sglang``, ``vllm`` and ``llama_cpp`` are phase-2 token backends and need
``--tokenizer``. A remote server is probed once before the run starts, so an unreachable URL
fails in seconds with the URL named. Every request (embedded: every generation) is bounded by
``--rollout-timeout``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import hermes_loop
from hermes_loop import ChatModel, ModelSpec, TokenModel
from hermes_protocols import ConfigError, ToolCallParser

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials

OPTION_NAMES = {
    "server_type": "--server-type",
    "base_url": "--model-url",
    "model": "--model",
    "tokenizer": "--tokenizer",
    "end_token_ids": "--end-token-ids",
    "parse_content_tool_calls": "--parse-tool-calls-from-content",
}


@attrs.frozen(slots=True)
class ModelParts:
    """The loop's model configuration, the model name recorded in trajectories, and the
    Hugging Face tokenizer directory when one is known (``--tokenizer``, or the embedded
    model's export)."""

    model: ChatModel | TokenModel
    name: str
    tokenizer_dir: Path | None = None


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


def model_spec(config: RunConfig, credentials: Credentials) -> ModelSpec:
    """The factory spec for ``config`` (``--model`` is the GGUF file when embedded)."""
    embedded = config.server_type == "embedded"
    return ModelSpec(
        server_type=config.server_type,
        base_url=config.model_url,
        model=None if embedded else config.model,
        api_key=credentials.api_key,
        tokenizer=config.tokenizer,
        extra_body=config.extra_body,
        timeout_s=config.rollout_timeout,
        context_tokens=config.context_tokens,
        gguf_path=config.model if embedded else None,
        end_token_ids=config.end_token_ids,
        server_logprob_mode=config.server_logprob_mode,
        parse_content_tool_calls=config.parse_content_tool_calls,
    )


@asynccontextmanager
async def open_model(config: RunConfig, credentials: Credentials) -> AsyncIterator[ModelParts]:
    """Start (and on exit release) the model the config names."""
    spec = model_spec(config, credentials)
    parser = get_parser(config.parser)
    async with hermes_loop.open_model(spec, parser, option_names=OPTION_NAMES) as handle:
        tokenizer_dir = Path(config.tokenizer) if config.tokenizer else None
        if tokenizer_dir is None and handle.export_hf_tokenizer is not None:
            from hermes_loop.embedded.hf_export import default_cache_dir

            tokenizer_dir = await handle.export_hf_tokenizer(default_cache_dir())
        yield ModelParts(handle.model, handle.name, tokenizer_dir)
