"""What apps need of a model besides the spec: its Hugging Face tokenizer directory, and a
:class:`~hermes_loop.ModelHandle` over a token backend an app brings itself (a trainer's
sampler), built the way :func:`hermes_loop.open_model` builds its token servers' models."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from hermes_loop import HFTokenizer, ModelHandle, ModelSpec, TokenModel
from hermes_loop.end_ids import resolve_end_ids
from hermes_loop.factory import LoraLoader
from hermes_protocols import TokenBackend, ToolCallParser

if TYPE_CHECKING:
    from hermes_loop.embedded.gguf_file import GGUFFile as GGUFFile
    from hermes_loop.embedded.gguf_file import GGUFTensor as GGUFTensor


def resolve_model_path(model: str | Path | None) -> Path:
    """The embedded model's GGUF file: ``model`` (a path), or the shipped SmolLM2 when
    ``None``."""
    # lazy: hermes_loop.embedded loads llama.cpp, which an app's light commands never need
    from hermes_loop.embedded.model_file import resolve_model_path as resolve

    return resolve(model)


def read_gguf_file(path: str | Path) -> GGUFFile:
    """A GGUF file's metadata and tensors (:func:`hermes_loop.embedded.gguf_file.read_gguf_file`;
    blocking)."""
    from hermes_loop.embedded.gguf_file import read_gguf_file as read

    return read(path)


def hf_tokenizer_dir(model: ModelSpec) -> Path | None:
    """The model's HF tokenizer directory: the embedded GGUF's export (written once, under
    ``~/.cache/hermes-rl/tokenizers``), else ``model.tokenizer`` (``None`` when unset).

    Blocking (may read the GGUF); call it through ``anyio.to_thread.run_sync`` from async code.
    """
    if model.server_type == "embedded":
        from hermes_loop.embedded.hf_export import default_cache_dir, export_hf_tokenizer

        return export_hf_tokenizer(resolve_model_path(model.gguf_path), default_cache_dir())
    return Path(model.tokenizer) if model.tokenizer else None


@attrs.frozen
class TokenizerDir:
    """An HF tokenizer directory loaded for token mode: the tokenizer, its chat template and
    every id that ends a turn (from the template and the directory's generation config)."""

    tokenizer: HFTokenizer
    end_ids: frozenset[int]

    @classmethod
    async def load(cls, directory: str) -> TokenizerDir:
        tokenizer = await HFTokenizer.load(directory)
        end_ids = resolve_end_ids(tokenizer, tokenizer.chat_template, directory=directory)
        return cls(tokenizer, end_ids)

    def model(
        self,
        backend: TokenBackend,
        parser: ToolCallParser,
        *,
        name: str,
        load_lora: LoraLoader | None = None,
    ) -> ModelHandle:
        """``backend`` as the loop's token model (``load_lora``: how it switches weights)."""
        template = self.tokenizer.chat_template
        model = TokenModel(backend, self.tokenizer, template, parser, end_token_ids=self.end_ids)
        return ModelHandle(model, name, self.tokenizer, template, load_lora=load_lora)
