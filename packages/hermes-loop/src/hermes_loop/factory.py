"""One place that turns a :class:`ModelSpec` into the agent loop's model.

``embedded`` runs a GGUF in-process (token mode, with the GGUF's end-of-generation ids wired);
``openai`` is phase 1 (an OpenAI-compatible chat server); ``sglang``, ``vllm`` and
``llama_cpp`` are phase-2 token backends over HTTP and need a Hugging Face tokenizer directory.
``extra_body`` reaches every HTTP backend the same way (merged into each request body). A remote
URL is probed once, so an unreachable server fails in seconds with the URL named.

Token backends get every end-of-generation id (:mod:`hermes_loop.end_ids`: from llama-server
itself, or the tokenizer directory, or ``end_token_ids``). ``server_logprob_mode`` tells the
vLLM / SGLang backends which logprobs their server returns (a start-up setting there).
``parse_content_tool_calls`` is phase 1's explicit fallback for servers that ignore ``tools``:
tool calls are parsed client-side from ``content`` with the run's parser.

Error messages name options through ``option_names`` (``{"base_url": "--model-url"}``), so each
app reports its own flags; unmapped fields read ``ModelSpec.<field>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import httpx
from hermes_protocols import (
    BackendError,
    ChatTemplate,
    ConfigError,
    JSONObject,
    LogprobMode,
    ToolCallParser,
)
from hermes_protocols import Tokenizer as TokenizerProtocol

from hermes_loop.end_ids import resolve_end_ids
from hermes_loop.engine import server_engine
from hermes_loop.hf_tokenizer import HFTokenizer
from hermes_loop.llama_server_backend import LlamaServerBackend
from hermes_loop.models import ChatModel, TokenModel
from hermes_loop.openai_chat import OpenAIChatBackend
from hermes_loop.sglang_backend import SGLangBackend
from hermes_loop.vllm_backend import VLLMBackend

ServerType = Literal["embedded", "openai", "sglang", "vllm", "llama_cpp"]
SERVER_TYPES: tuple[ServerType, ...] = ("embedded", "openai", "sglang", "vllm", "llama_cpp")
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_PROBE_TIMEOUT_S = 10.0


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ConfigError(f"ModelSpec.{attribute.name} must be > 0, got {value!r}")


def _id_tuple(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(v) for v in value)


def _server_type(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if value not in SERVER_TYPES:
        raise ConfigError(f"unknown server type {value!r}; known: {', '.join(SERVER_TYPES)}")


@attrs.frozen(kw_only=True)
class ModelSpec:
    """Where generations come from.

    ``model`` is the served model's name (``openai``/``vllm`` need it); ``tokenizer`` the HF
    tokenizer directory (token servers need it; for ``openai`` it is optional and only loaded
    so callers can retokenize); ``gguf_path`` the embedded model file (default: SmolLM2).
    ``timeout_s`` bounds each request (embedded: each generation); ``probe_timeout_s`` the
    one-off reachability probe of ``base_url`` (``probe=False`` skips it).
    ``end_token_ids`` replaces the end ids read from the server / tokenizer (token mode);
    ``server_logprob_mode`` is the mode a vLLM / SGLang server returns (``None``: the engine's
    default, raw for vLLM, sampled for SGLang); ``parse_content_tool_calls`` turns on phase 1's
    client-side parsing of tool calls found in ``content``. Embedded only: ``concurrency`` is
    how many rollouts generate at once (one KV-cache sequence each, decoded in shared
    batches), ``threads`` the llama.cpp threads (default: physical cores), ``deterministic``
    one sequence per decode (bitwise replay, slower).
    """

    server_type: ServerType = attrs.field(default="embedded", validator=_server_type)
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    tokenizer: str | None = None
    extra_body: JSONObject | None = None
    timeout_s: float = attrs.field(default=DEFAULT_TIMEOUT_S, validator=_positive)
    probe: bool = True
    probe_timeout_s: float = attrs.field(default=DEFAULT_PROBE_TIMEOUT_S, validator=_positive)
    context_tokens: int = attrs.field(default=4096, validator=_positive)
    gguf_path: str | None = None
    end_token_ids: tuple[int, ...] | None = attrs.field(default=None, converter=_id_tuple)
    server_logprob_mode: LogprobMode | None = None
    parse_content_tool_calls: bool = False
    concurrency: int = attrs.field(default=1, validator=_positive)
    threads: int | None = attrs.field(default=None, validator=attrs.validators.optional(_positive))
    deterministic: bool = False


HFExport = Callable[[str | Path], Awaitable[Path]]
LoraLoader = Callable[[str | Path | None], Awaitable[None]]


@attrs.frozen
class ModelHandle:
    """The loop's model and what callers need around it.

    ``tokenizer``/``template`` are set whenever known (always in token mode; in phase 1 only
    when ``ModelSpec.tokenizer`` is given). ``export_hf_tokenizer(cache_dir)`` exists for the
    embedded model: it writes (once) an HF tokenizer directory matching the GGUF.
    ``load_lora(path)`` exists for the embedded model too: later generations use the GGUF LoRA
    adapter at ``path`` (``None``: the base weights), as a trainer's sampler needs.
    """

    model: ChatModel | TokenModel
    name: str
    tokenizer: TokenizerProtocol | None = None
    template: ChatTemplate | None = None
    export_hf_tokenizer: HFExport | None = None
    load_lora: LoraLoader | None = None


def _option(name: str, option_names: Mapping[str, str] | None) -> str:
    return (option_names or {}).get(name, f"ModelSpec.{name}")


async def probe_server(
    url: str, *, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S, option: str = "ModelSpec.base_url"
) -> None:
    """Raise :class:`BackendError` naming ``url`` when nothing answers there (any HTTP status
    counts as an answer); a malformed URL is a :class:`ConfigError` naming ``option``."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            await client.get(url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"{option} {url!r} is not a valid URL: {exc}") from exc
    except httpx.HTTPError as exc:
        raise BackendError(
            f"cannot reach the model server at {url} ({type(exc).__name__}: {exc}); check {option}"
        ) from exc


def check_spec(spec: ModelSpec, *, option_names: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` naming the missing option before anything is opened."""
    kind = spec.server_type
    server_opt = _option("server_type", option_names)
    if kind == "embedded":
        return
    if not spec.base_url:
        raise ConfigError(
            f"{server_opt} {kind} needs {_option('base_url', option_names)} (the server's base URL)"
        )
    if kind in ("openai", "vllm") and not spec.model:
        raise ConfigError(
            f"{server_opt} {kind} needs {_option('model', option_names)} (the served model's name)"
        )
    if kind != "openai" and not spec.tokenizer:
        raise ConfigError(
            f"{server_opt} {kind} is token mode: pass {_option('tokenizer', option_names)} DIR "
            "(the served model's Hugging Face tokenizer directory)"
        )


@asynccontextmanager
async def open_model(
    spec: ModelSpec, parser: ToolCallParser, *, option_names: Mapping[str, str] | None = None
) -> AsyncIterator[ModelHandle]:
    """Build the backend ``spec`` names; it is released (model freed, HTTP pool closed) on exit,
    also on error or cancellation."""
    check_spec(spec, option_names=option_names)
    if spec.server_type == "embedded":
        async with _embedded(spec, parser) as handle:
            yield handle
        return
    url = spec.base_url
    assert url is not None  # check_spec
    if spec.probe:
        option = _option("base_url", option_names)
        await probe_server(url, timeout_s=spec.probe_timeout_s, option=option)
    tokenizer = await HFTokenizer.load(spec.tokenizer) if spec.tokenizer else None
    template = tokenizer.chat_template if tokenizer is not None else None
    async with AsyncExitStack() as stack:
        if spec.server_type == "openai":
            assert spec.model is not None  # check_spec
            chat = OpenAIChatBackend(
                url, model=spec.model, api_key=spec.api_key or None, timeout_s=spec.timeout_s
            )
            stack.push_async_callback(chat.aclose)
            model: ChatModel | TokenModel = ChatModel(
                chat,
                extra_body=spec.extra_body,
                parser=parser,
                parse_content=spec.parse_content_tool_calls,
            )
        else:
            assert tokenizer is not None  # check_spec
            assert template is not None
            backend = _token_backend(spec, url, tokenizer)
            stack.push_async_callback(backend.aclose)
            server_ids: frozenset[int] = frozenset()
            if isinstance(backend, LlamaServerBackend) and spec.end_token_ids is None:
                server_ids = await backend.end_token_ids()
            end_ids = resolve_end_ids(
                tokenizer,
                template,
                override=spec.end_token_ids,
                server=server_ids,
                directory=spec.tokenizer,
            )
            model = TokenModel(
                backend,
                tokenizer,
                template,
                parser,
                end_token_ids=end_ids,
                engine=server_engine(spec.server_type),
            )
        yield ModelHandle(model, spec.model or f"{spec.server_type}:{url}", tokenizer, template)


def _token_backend(
    spec: ModelSpec, url: str, tokenizer: HFTokenizer
) -> SGLangBackend | VLLMBackend | LlamaServerBackend:
    timeout, api_key = spec.timeout_s, spec.api_key or None
    if spec.server_type == "sglang":
        return SGLangBackend(
            url,
            extra_sampling=spec.extra_body,
            logprob_mode=spec.server_logprob_mode or "sampled",
            api_key=api_key,
            timeout_s=timeout,
        )
    if spec.server_type == "vllm":
        assert spec.model is not None  # check_spec
        return VLLMBackend(
            url,
            model=spec.model,
            extra_body=spec.extra_body,
            logprob_mode=spec.server_logprob_mode or "raw",
            api_key=api_key,
            timeout_s=timeout,
        )
    return LlamaServerBackend(
        url,
        extra_body=spec.extra_body,
        token_bytes=tokenizer.token_bytes,
        api_key=api_key,
        timeout_s=timeout,
    )


@asynccontextmanager
async def _embedded(spec: ModelSpec, parser: ToolCallParser) -> AsyncIterator[ModelHandle]:
    """The GGUF in-process, token mode, end-of-generation ids from the GGUF."""
    from hermes_loop.embedded import EmbeddedModel  # lazy: needs the ``embedded`` extra

    async with await EmbeddedModel.open(
        spec.gguf_path or None,
        n_ctx=spec.context_tokens,
        concurrency=spec.concurrency,
        n_threads=spec.threads,
        deterministic=spec.deterministic,
        timeout_s=spec.timeout_s,
    ) as embedded:
        yield ModelHandle(
            embedded.token_model(parser),
            f"embedded:{embedded.path.name}",
            embedded.tokenizer,
            embedded.template,
            embedded.hf_tokenizer_dir,
            embedded.backend.load_lora,
        )
