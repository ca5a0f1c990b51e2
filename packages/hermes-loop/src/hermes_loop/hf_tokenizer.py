"""A :class:`hermes_protocols.Tokenizer` over a local Hugging Face tokenizer directory.

Needs the ``hf`` extra (``transformers``; fast tokenizers load without torch). Nothing is ever
downloaded: the directory must hold ``tokenizer.json`` / ``tokenizer_config.json``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from hermes_protocols import ConfigError

from hermes_loop.chat_template import JinjaChatTemplate
from hermes_loop.token_bytes import TokenBytes, hf_token_bytes

#: what transformers logs at import time when PyTorch is missing: noise here, since a tokenizer
#: needs no PyTorch
TORCH_NOTICE = "PyTorch was not found"


def _not_the_torch_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(TORCH_NOTICE)


@contextlib.contextmanager
def without_torch_notice() -> Iterator[None]:
    """Drop transformers' PyTorch notice while the block runs (a filter on its logger, removed
    on exit); every other record passes."""
    logger = logging.getLogger("transformers")
    logger.addFilter(_not_the_torch_notice)
    try:
        yield
    finally:
        logger.removeFilter(_not_the_torch_notice)


class HFTokenizer:
    """Ids <-> text with a transformers tokenizer, plus its chat template.

    Build it with :meth:`from_directory` (blocking: run it at start-up, or use
    :meth:`load` from async code) or wrap an already loaded tokenizer object.
    """

    def __init__(self, tokenizer: Any, *, chat_template: str | None = None) -> None:
        self._tok = tokenizer
        # the Rust tokenizer behind a fast transformers tokenizer: same ids, a fraction of the
        # Python overhead per call; decode gives the raw text (no clean-up of spaces)
        self._fast = getattr(tokenizer, "backend_tokenizer", None)
        self._bytes = hf_token_bytes(self._fast) if self._fast is not None else None
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ConfigError("the tokenizer has no eos_token_id; set eos_token in its config")
        self._eos = int(eos)
        source = chat_template if chat_template is not None else tokenizer.chat_template
        self._template: JinjaChatTemplate | None = None
        if isinstance(source, str):
            self._template = JinjaChatTemplate(
                source,
                bos_token=tokenizer.bos_token or "",
                eos_token=tokenizer.eos_token or "",
            )

    @classmethod
    def from_directory(cls, path: str | Path, *, chat_template: str | None = None) -> HFTokenizer:
        """Load a tokenizer from a local directory (never from the network)."""
        directory = Path(path)
        if not directory.is_dir():
            raise ConfigError(f"tokenizer directory {directory} does not exist")
        try:
            with without_torch_notice():
                from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError("HFTokenizer needs transformers: install hermes-loop[hf]") from exc
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load a tokenizer from {directory}: {exc}") from exc
        return cls(tokenizer, chat_template=chat_template)

    @classmethod
    async def load(cls, path: str | Path, *, chat_template: str | None = None) -> HFTokenizer:
        """:meth:`from_directory` in a worker thread."""
        return await anyio.to_thread.run_sync(
            lambda: cls.from_directory(path, chat_template=chat_template)
        )

    @property
    def eos_token_id(self) -> int:
        return self._eos

    @property
    def token_bytes(self) -> TokenBytes | None:
        """``id -> bytes`` of each token's piece (:mod:`hermes_loop.token_bytes`); ``None`` for
        a slow (Python) tokenizer."""
        return self._bytes

    @property
    def chat_template(self) -> JinjaChatTemplate:
        if self._template is None:
            raise ConfigError("this tokenizer has no chat_template; pass one explicitly")
        return self._template

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        if self._fast is not None:
            ids: list[int] = self._fast.encode(text, add_special_tokens=add_special_tokens).ids
            return ids
        return [int(i) for i in self._tok.encode(text, add_special_tokens=add_special_tokens)]

    def decode(self, ids: Sequence[int]) -> str:
        if self._fast is not None:
            return str(self._fast.decode(list(ids), skip_special_tokens=False))
        return str(self._tok.decode(list(ids), skip_special_tokens=False))
