"""The bytes each token id stands for, as llama.cpp renders a generated token's piece.

llama-server leaves out the logprob entry of a token after which the generated text ends inside
a UTF-8 character; knowing every token's bytes tells which positions can carry an entry (see
:func:`hermes_loop.llama_server_backend.align_entries`). Byte-level BPE vocabularies (GPT-2's
mapping) and byte-fallback ones (``<0xNN>`` pieces, ``▁`` for a space) are read from a Hugging
Face tokenizer; special tokens render as nothing (llama-server without ``--special``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

TokenBytes = Callable[[int], bytes]
"""``id -> bytes`` of the token's piece."""

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_level_chars() -> list[str]:
    """The character byte-level BPE uses for each byte value 0..255 (GPT-2's mapping).

    Printable Latin-1 bytes stand for themselves; the other bytes, in order, take the code
    points from U+0100 upwards.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars: dict[int, str] = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in chars:
            chars[byte] = chr(0x100 + extra)
            extra += 1
    return [chars[byte] for byte in range(256)]


def hf_token_bytes(fast: Any) -> TokenBytes:
    """``id -> bytes`` for a ``tokenizers.Tokenizer`` (the Rust tokenizer of a fast HF one)."""
    from tokenizers import decoders

    special = {i for i, token in fast.get_added_tokens_decoder().items() if token.special}
    byte_level = isinstance(fast.decoder, decoders.ByteLevel)
    values = {char: byte for byte, char in enumerate(byte_level_chars())}

    def token_bytes(token_id: int) -> bytes:
        piece = fast.id_to_token(token_id)
        if piece is None or token_id in special:
            return b""
        matched = _BYTE_PIECE.fullmatch(piece)
        if matched:
            return bytes([int(matched.group(1), 16)])
        if byte_level and all(char in values for char in piece):
            return bytes(values[char] for char in piece)
        return str(piece).replace("\u2581", " ").encode("utf-8")

    return token_bytes
