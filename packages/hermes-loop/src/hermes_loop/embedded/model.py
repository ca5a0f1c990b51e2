"""Everything the embedded model offers, opened together: token backend, tokenizer, template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import llama_cpp
from hermes_protocols import ToolCallParser

from hermes_loop.chat_template import JinjaChatTemplate
from hermes_loop.embedded.chat_backend import EmbeddedChatBackend
from hermes_loop.embedded.gguf_tokenizer import GGUFTokenizer
from hermes_loop.embedded.hf_export import export_hf_tokenizer
from hermes_loop.embedded.model_file import resolve_model_path
from hermes_loop.embedded.runtime import BATCH_INVARIANT_UBATCH
from hermes_loop.embedded.token_backend import EmbeddedTokenBackend
from hermes_loop.engine import embedded_engine
from hermes_loop.models import TokenModel


class EmbeddedModel:
    """An in-process llama.cpp model with its GGUF-built tokenizer and chat template.

    ``async with await EmbeddedModel.open() as model:`` loads SmolLM2-135M-Instruct (or the
    ``.gguf`` you name) in worker threads; ``model.backend`` is the token backend (phase 2),
    :meth:`token_model` wraps it for the loop and :meth:`chat_backend` builds the chat backend
    (phase 1), each around a parser you pass in.
    """

    def __init__(
        self,
        path: Path,
        backend: EmbeddedTokenBackend,
        tokenizer: GGUFTokenizer,
        template: JinjaChatTemplate,
    ) -> None:
        self.path = path
        self.backend = backend
        self.tokenizer = tokenizer
        self.template = template

    @classmethod
    async def open(
        cls,
        model: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        concurrency: int = 1,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = BATCH_INVARIANT_UBATCH,
        timeout_s: float | None = None,
        deterministic: bool = False,
        template_options: dict[str, Any] | None = None,
        quiet: bool = True,
        cache_dir: str | Path | None = None,
    ) -> EmbeddedModel:
        """Load the model and build its tokenizer (both in worker threads).

        ``n_ctx`` is the context of one rollout, ``concurrency`` how many rollouts generate at
        once (one KV-cache sequence each, batched together); ``n_threads`` defaults to the
        physical cores; ``deterministic`` decodes one sequence at a time (bitwise replay).
        The default model is the shipped SmolLM2 converted once to Q8_0 into ``cache_dir``
        (default ``~/.cache/hermes-rl/models``); a path you name is used as it is.
        """
        path = await anyio.to_thread.run_sync(
            lambda: resolve_model_path(model, cache_dir=cache_dir)
        )
        tokenizer = await anyio.to_thread.run_sync(GGUFTokenizer.from_gguf, path)
        template = tokenizer.chat_template(**(template_options or {}))
        backend = await EmbeddedTokenBackend.open(
            path,
            n_ctx=n_ctx,
            concurrency=concurrency,
            n_threads=n_threads,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            timeout_s=timeout_s,
            deterministic=deterministic,
            quiet=quiet,
        )
        return cls(path, backend, tokenizer, template)

    @property
    def end_token_ids(self) -> frozenset[int]:
        """Every end-of-generation id the GGUF declares (SmolLM2: ``<|endoftext|>`` 0,
        ``<|im_end|>`` 2, ``<reponame>`` 4); the token backend stops on any of them."""
        return self.backend.end_token_ids

    def token_model(self, parser: ToolCallParser, *, check_drift: bool = True) -> TokenModel:
        """A phase-2 :class:`~hermes_loop.TokenModel` on this model, with its end ids wired."""
        return TokenModel(
            self.backend,
            self.tokenizer,
            self.template,
            parser,
            check_drift=check_drift,
            end_token_ids=self.end_token_ids,
            engine=embedded_engine(self.backend.runtime.n_ubatch, llama_cpp.__version__),
        )

    def chat_backend(self, parser: ToolCallParser) -> EmbeddedChatBackend:
        """A phase-1 chat backend on this model, parsing tool calls with ``parser``."""
        return EmbeddedChatBackend(
            self.backend, self.tokenizer, self.template, parser, end_token_ids=self.end_token_ids
        )

    async def hf_tokenizer_dir(self, cache_dir: str | Path) -> Path:
        """Export (once) and return an HF tokenizer directory under ``cache_dir``."""
        return await anyio.to_thread.run_sync(
            lambda: export_hf_tokenizer(self.path, cache_dir, tokenizer=self.tokenizer)
        )

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def __aenter__(self) -> EmbeddedModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
