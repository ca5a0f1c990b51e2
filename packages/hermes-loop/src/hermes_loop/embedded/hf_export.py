"""Export the GGUF-built tokenizer as a Hugging Face tokenizer directory, cached on disk.

The directory holds ``tokenizer.json``, ``tokenizer_config.json`` (chat template, bos/eos/pad)
and ``special_tokens_map.json``, so ``transformers.AutoTokenizer.from_pretrained(directory)``
works without torch (atroposlib needs such a tokenizer). The cache location is always passed in
by the caller; :func:`default_cache_dir` is only a documented suggestion.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from hermes_loop.embedded.gguf_tokenizer import TOKEN_CONTROL, GGUFTokenizer

#: bytes of the GGUF hashed to name its cache entry (the header holds the whole vocabulary)
_HASHED_PREFIX = 8 << 20
#: bumped whenever the exported files change, so stale cache entries are not reused
#: (2: bytes with no token split pre-tokens, as in llama.cpp)
EXPORT_VERSION = 2


def default_cache_dir() -> Path:
    """``~/.cache/hermes-rl/tokenizers``: a suggestion for callers; nothing uses it implicitly."""
    return Path.home() / ".cache" / "hermes-rl" / "tokenizers"


def gguf_fingerprint(path: str | Path) -> str:
    """A short content hash of a GGUF (its size and first 8 MiB, where the vocabulary lives)."""
    file = Path(path)
    digest = hashlib.sha256(str(file.stat().st_size).encode())
    with file.open("rb") as handle:
        digest.update(handle.read(_HASHED_PREFIX))
    return digest.hexdigest()[:16]


def write_hf_tokenizer(tokenizer: GGUFTokenizer, directory: str | Path) -> Path:
    """Write the HF tokenizer files into ``directory`` (created if needed); return it."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    vocab = tokenizer.vocab
    tokenizer.fast.save(str(target / "tokenizer.json"))
    special = {
        "bos_token": vocab.token(vocab.bos_token_id),
        "eos_token": vocab.token(vocab.eos_token_id),
        "unk_token": vocab.token(vocab.unknown_token_id),
        "pad_token": vocab.token(vocab.padding_token_id),
    }
    extra = [
        token
        for token, kind in zip(vocab.tokens, vocab.token_types, strict=True)
        if kind == TOKEN_CONTROL and token not in special.values()
    ]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "additional_special_tokens": extra,
        "add_bos_token": vocab.add_bos_token,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 8192,
        "chat_template": vocab.chat_template,
    }
    (target / "tokenizer_config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8"
    )
    special_map = {k: v for k, v in special.items() if v is not None}
    special_map_all = {**special_map, "additional_special_tokens": extra}
    (target / "special_tokens_map.json").write_text(
        json.dumps(special_map_all, ensure_ascii=False, indent=2), encoding="utf-8"
    )
    return target


def export_hf_tokenizer(
    gguf_path: str | Path,
    cache_dir: str | Path,
    *,
    tokenizer: GGUFTokenizer | None = None,
) -> Path:
    """Return ``cache_dir/<gguf name>-v<EXPORT_VERSION>-<fingerprint>``, exported if missing.

    Blocking (reads the GGUF); call it through ``anyio.to_thread.run_sync`` from async code.
    Concurrent exports are safe: each writes a temporary directory and renames it into place.
    """
    source = Path(gguf_path)
    root = Path(cache_dir)
    final = root / f"{source.stem}-v{EXPORT_VERSION}-{gguf_fingerprint(source)}"
    if (final / "tokenizer_config.json").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    built = tokenizer if tokenizer is not None else GGUFTokenizer.from_gguf(source)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=root))
    try:
        write_hf_tokenizer(built, staging)
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / "tokenizer_config.json").is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final
