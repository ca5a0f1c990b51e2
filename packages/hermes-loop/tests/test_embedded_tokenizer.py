"""The GGUF-built tokenizer against llama.cpp's own, id for id, and its HF export."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import llama_cpp
import pytest
from hermes_loop.embedded import (
    GGUFTokenizer,
    default_model_path,
    export_hf_tokenizer,
    gguf_fingerprint,
)
from hermes_protocols import Message
from hypothesis import assume, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>"]
PIECES = [
    " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u2003", "\u3000",
    "0", "7", "12", "2024", "3.14", "1,000,000", "-42", "١٢٣", "½", "²",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "don't", "I'M",
    "hello", "Hello", " world", "naïve", "café", "Ünïcödé", "straße", "Ελληνικά", "русский",
    "中文", "日本語のテキスト", "한국어", "עברית", "العربية", "हिन्दी", "ไทย",
    "😀", "👩‍💻", "🇫🇷", "e\u0301", "\u200b", "\ufeff",
    "{", "}", "[", "]", '"', ":", ",", "<", ">", "</", "/>", "<tool_call>", "```", "...",
    "def f(x):\n    return x", "<|im_start", "im_end|>", "<<>>", "$$", "#!",
]  # fmt: skip


def _assigned(char: str) -> str:
    """``char`` if Python's Unicode database (14.0) assigns it, else the euro sign.

    llama.cpp's and HF tokenizers' regex tables follow different Unicode versions: a code point
    assigned only recently (e.g. U+13BA8, Unicode 16) is a letter for one and not the other, so
    the two split text around it differently. Surrogates cannot be encoded at all.
    """
    return char if unicodedata.category(char) not in ("Cn", "Cs") else "\u20ac"


def random_corpus(n: int, seed: int) -> list[str]:
    """Fixed random strings: concatenated pieces, random code points and special tokens."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            roll = rng.random()
            if roll < 0.6:
                parts.append(rng.choice(PIECES))
            elif roll < 0.9:
                code = rng.choice([rng.randint(32, 0x7F), rng.randint(0xA0, 0x2FFF)])
                parts.append(_assigned(chr(code)) * rng.randint(1, 3))
            elif roll < 0.97:
                parts.append(_assigned(chr(rng.randint(0x3000, 0x1F9FF))))
            else:
                parts.append(rng.choice(SPECIALS))
        corpus.append("".join(parts))
    return corpus


@pytest.fixture(scope="module")
def embedded_tokenizer() -> GGUFTokenizer:
    return GGUFTokenizer.from_gguf(default_model_path())


@pytest.fixture(scope="module")
def embedded_llama_vocab() -> llama_cpp.Llama:
    return llama_cpp.Llama(str(default_model_path()), vocab_only=True, verbose=False)


def llama_ids(llama: llama_cpp.Llama, text: str) -> list[int]:
    return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def test_identical_ids_on_a_fixed_random_corpus(
    embedded_tokenizer: GGUFTokenizer, embedded_llama_vocab: llama_cpp.Llama
) -> None:
    corpus = random_corpus(3000, seed=20261122)
    mismatches = [
        (text, ours, theirs)
        for text in corpus
        if (ours := embedded_tokenizer.encode(text))
        != (theirs := llama_ids(embedded_llama_vocab, text))
    ]
    assert not mismatches, mismatches[:3]
    assert sum(len(embedded_tokenizer.encode(t)) for t in corpus) > 30_000  # not trivially short


#: SmolLM2 has no token for these bytes; llama.cpp drops them and never merges across them
NO_TOKEN_BYTES = ["\x04", "\x06", "\x13", "\x14", "\x16", "\x1d"]


@pytest.mark.parametrize(
    "text",
    [
        '"\x1d{',  # found by hypothesis: '"{' is one token, but not across the missing byte
        "  \x1d{",
        "..\x1d..",
        "a\x04b\x06c",
        "12\x1d34",
        "hello \x13\x14\x16 world",
        "<|im_end|>\x1d<|im_start|>",
        "".join(NO_TOKEN_BYTES),
    ],
)
def test_bytes_without_a_token_block_merges_as_in_llama_cpp(
    embedded_tokenizer: GGUFTokenizer, embedded_llama_vocab: llama_cpp.Llama, text: str
) -> None:
    assert embedded_tokenizer.encode(text) == llama_ids(embedded_llama_vocab, text)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cn")), max_size=30),
            st.text("0123456789 \n\t.,'", max_size=30),
            st.sampled_from(SPECIALS + PIECES),
        ),
        max_size=6,
    ).map("".join)
)
def test_identical_ids_on_generated_text(
    embedded_tokenizer: GGUFTokenizer, embedded_llama_vocab: llama_cpp.Llama, text: str
) -> None:
    assert embedded_tokenizer.encode(text) == llama_ids(embedded_llama_vocab, text)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cn")), max_size=60))
def test_decode_inverts_encode(embedded_tokenizer: GGUFTokenizer, text: str) -> None:
    # SmolLM2's vocabulary has no token for some bytes (e.g. 0xF1, lead byte of planes 4-7);
    # llama.cpp drops them the same way, so only representable text can round-trip
    known = set(embedded_tokenizer.vocab.tokens)
    unrepresentable = {b for b, char in _byte_chars().items() if char not in known}
    assume(not unrepresentable.intersection(text.encode("utf-8")))
    assert embedded_tokenizer.decode(embedded_tokenizer.encode(text)) == text


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the alphabet of byte-level BPE tokens)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def test_dropped_bytes_match_llama_cpp(
    embedded_tokenizer: GGUFTokenizer, embedded_llama_vocab: llama_cpp.Llama
) -> None:
    text = "plane four: \U00040000 and ñ"
    assert embedded_tokenizer.encode(text) == llama_ids(embedded_llama_vocab, text)


def test_special_tokens_and_metadata(embedded_tokenizer: GGUFTokenizer) -> None:
    assert embedded_tokenizer.eos_token_id == 2
    assert embedded_tokenizer.encode("<|im_end|>") == [2]
    assert embedded_tokenizer.decode([1, 2]) == "<|im_start|><|im_end|>"
    assert embedded_tokenizer.encode("hi", add_special_tokens=True) == embedded_tokenizer.encode(
        "hi"
    )
    template = embedded_tokenizer.chat_template()
    text = template.render([Message.user("Hi")], add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_hf_export_loads_with_transformers_and_agrees(
    embedded_tokenizer: GGUFTokenizer, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    model = default_model_path()
    directory = export_hf_tokenizer(model, tmp_path, tokenizer=embedded_tokenizer)
    assert directory.parent == tmp_path
    assert directory.name.endswith(gguf_fingerprint(model))
    stamp = (directory / "tokenizer.json").stat().st_mtime_ns
    assert export_hf_tokenizer(model, tmp_path) == directory  # cached: not rebuilt
    assert (directory / "tokenizer.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [directory.name]  # no staging left behind

    hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    assert hf.eos_token == "<|im_end|>"
    assert hf.eos_token_id == 2
    assert hf.bos_token_id == 1
    for text in [*random_corpus(500, seed=7), '"\x1d{', "a\x04b \x1d.."]:
        assert hf.encode(text, add_special_tokens=False) == embedded_tokenizer.encode(text)
    conversation = [{"role": "user", "content": "What is 2+2?"}]
    rendered = hf.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert rendered == embedded_tokenizer.chat_template().render(
        [Message.user("What is 2+2?")], add_generation_prompt=True
    )
