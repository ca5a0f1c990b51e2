"""Token text from a ``tokenizer.json`` (the ``tokenizers`` library, no model hub access)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
from tokenizers import Tokenizer


class TokenizerFileError(Exception):
    """The tokenizer file cannot be read; the message names it."""


@attrs.frozen(slots=True)
class TokenTexts:
    """Each token's own text (its bytes decoded alone) and the tokenizer's special ids."""

    tokenizer: Tokenizer
    special_ids: frozenset[int]

    @classmethod
    def from_file(cls, path: str | Path) -> TokenTexts:
        """Load ``tokenizer.json`` at ``path``."""
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises a bare Exception
            raise TokenizerFileError(
                f"cannot read tokenizer file {path}: {exc} (pass a Hugging Face tokenizer.json)"
            ) from exc
        decoder = tokenizer.get_added_tokens_decoder()
        special = frozenset(i for i, token in decoder.items() if token.special)
        return cls(tokenizer, special)

    def __call__(self, ids: Sequence[int]) -> list[str]:
        """The text of each id, decoded on its own (special tokens included)."""
        return [self.tokenizer.decode([i], skip_special_tokens=False) for i in ids]
