"""A Hugging Face ``tokenizers`` BPE rebuilt from a GGUF file's own vocabulary and merges.

transformers can only read a GGUF tokenizer with torch installed, so we read the vocabulary
with the ``gguf`` package and assemble the same byte-level BPE with ``tokenizers``. For
SmolLM2 (GGUF pre-tokenizer ``smollm``) digits are split one by one before the GPT-2 byte-level
regex, exactly as llama.cpp does; the result is checked id-for-id against llama.cpp in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from hermes_protocols import ConfigError
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as FastTokenizer

from hermes_loop.chat_template import JinjaChatTemplate
from hermes_loop.embedded.gguf_file import read_gguf_file
from hermes_loop.token_bytes import byte_level_chars

#: GGUF token types (llama.cpp ``llama_token_type``)
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4

#: GGUF ``tokenizer.ggml.pre`` values we can reproduce, and whether digits are split singly
_PRE_TOKENIZERS = {"smollm": True, "gpt-2": False, "gpt2": False, "default": False}


@attrs.frozen(slots=True)
class GGUFVocab:
    """The tokenizer part of a GGUF file's metadata."""

    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]
    pre: str
    bos_token_id: int | None
    eos_token_id: int
    unknown_token_id: int | None
    padding_token_id: int | None
    add_bos_token: bool
    chat_template: str | None

    def token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.tokens[token_id]


def read_gguf_vocab(path: str | Path) -> GGUFVocab:
    """Read the tokenizer metadata of a GGUF file (blocking; well under a second)."""
    metadata = read_gguf_file(path).metadata

    def get(key: str, default: Any = None) -> Any:
        return metadata.get(key, default)

    model = get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ConfigError(
            f"{path}: tokenizer model {model!r} is not supported (only byte-level BPE, 'gpt2'); "
            "use HFTokenizer with the model's tokenizer directory instead"
        )
    pre = str(get("tokenizer.ggml.pre", "default"))
    if pre not in _PRE_TOKENIZERS:
        raise ConfigError(
            f"{path}: pre-tokenizer {pre!r} is not supported (known: {sorted(_PRE_TOKENIZERS)}); "
            "use HFTokenizer with the model's tokenizer directory instead"
        )
    eos = get("tokenizer.ggml.eos_token_id")
    if eos is None:
        raise ConfigError(f"{path}: the GGUF declares no eos token")
    bos = get("tokenizer.ggml.bos_token_id")
    unk = get("tokenizer.ggml.unknown_token_id")
    pad = get("tokenizer.ggml.padding_token_id")
    return GGUFVocab(
        tokens=tuple(get("tokenizer.ggml.tokens")),
        token_types=tuple(int(t) for t in get("tokenizer.ggml.token_type")),
        merges=tuple(get("tokenizer.ggml.merges", ())),
        pre=pre,
        bos_token_id=None if bos is None else int(bos),
        eos_token_id=int(eos),
        unknown_token_id=None if unk is None else int(unk),
        padding_token_id=None if pad is None else int(pad),
        add_bos_token=bool(get("tokenizer.ggml.add_bos_token", False)),
        chat_template=get("tokenizer.chat_template"),
    )


def build_fast_tokenizer(vocab: GGUFVocab) -> FastTokenizer:
    """Assemble the ``tokenizers`` pipeline equivalent to llama.cpp's for this vocabulary."""
    ids = {token: index for index, token in enumerate(vocab.tokens)}
    merges = []
    for merge in vocab.merges:
        left, sep, right = merge.partition(" ")
        if not sep:
            raise ConfigError(f"malformed merge {merge!r} in the GGUF")
        merges.append((left, right))
    tokenizer = FastTokenizer(models.BPE(vocab=ids, merges=merges, fuse_unk=False))
    steps: list[pre_tokenizers.PreTokenizer] = []
    if _PRE_TOKENIZERS[vocab.pre]:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    missing = [char for char in byte_level_chars() if char not in ids]
    if missing:
        # a byte with no token (SmolLM2 lacks e.g. 0x1D) is dropped by llama.cpp, and BPE merges
        # never cross it; splitting the pre-token there (removing it) does the same
        steps.append(pre_tokenizers.Split(Regex(_char_class(missing)), behavior="removed"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tokenizer.decoder = decoders.ByteLevel()
    added = [
        AddedToken(token, special=kind == TOKEN_CONTROL, normalized=False)
        for token, kind in zip(vocab.tokens, vocab.token_types, strict=True)
        if kind in (TOKEN_CONTROL, TOKEN_USER_DEFINED)
    ]
    tokenizer.add_tokens(added)
    return tokenizer


def _char_class(chars: Sequence[str]) -> str:
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]"


class GGUFTokenizer:
    """A :class:`hermes_protocols.Tokenizer` built from a GGUF file, plus its chat template.

    Special tokens written in the text (``<|im_start|>``) become their ids, as llama.cpp does
    with ``parse_special``; :meth:`decode` keeps special tokens in the text.
    """

    def __init__(self, vocab: GGUFVocab) -> None:
        self.vocab = vocab
        self._tok = build_fast_tokenizer(vocab)

    @classmethod
    def from_gguf(cls, path: str | Path) -> GGUFTokenizer:
        """Read and build (blocking; use ``anyio.to_thread.run_sync`` from async code)."""
        return cls(read_gguf_vocab(path))

    @property
    def eos_token_id(self) -> int:
        return self.vocab.eos_token_id

    @property
    def bos_token_id(self) -> int | None:
        return self.vocab.bos_token_id

    @property
    def fast(self) -> FastTokenizer:
        """The underlying ``tokenizers.Tokenizer``."""
        return self._tok

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        ids = list(self._tok.encode(text, add_special_tokens=False).ids)
        if add_special_tokens and self.vocab.add_bos_token and self.vocab.bos_token_id is not None:
            ids.insert(0, self.vocab.bos_token_id)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def chat_template(self, **options: Any) -> JinjaChatTemplate:
        """The GGUF's ``tokenizer.chat_template`` as a :class:`JinjaChatTemplate`.

        ``options`` go to :class:`JinjaChatTemplate` (e.g. ``tool_fallback=True``). Templates
        that never mention ``tools`` (SmolLM2's) use the Hermes system-prompt fallback.
        """
        if self.vocab.chat_template is None:
            raise ConfigError("this GGUF has no tokenizer.chat_template; pass a template")
        return JinjaChatTemplate(
            self.vocab.chat_template,
            bos_token=self.vocab.token(self.vocab.bos_token_id) or "",
            eos_token=self.vocab.token(self.vocab.eos_token_id) or "",
            **options,
        )
