"""Shared fixtures: a real byte-level BPE tokenizer saved as an HF directory, a ChatML template,
a minimal Hermes-format tool-call parser, scripted backends and executors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hermes_loop import HFTokenizer
from hermes_protocols import ParsedToolCall, ParsedTurn, ToolParseError
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CHATML = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    "<tool_response>\n3\n</tool_response>",
    "You are a function calling AI model. Here are the available tools: <tools> </tools>",
    "system user assistant tool hello world answer result error",
    "0123456789 {}[]:,\"' abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer_dir(path: Path, chat_template: str = CHATML) -> Path:
    """Train a tiny byte-level BPE and save it as a transformers tokenizer directory."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": chat_template,
        "model_max_length": 32768,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def hf_tokenizer(tokenizer_dir: Path) -> HFTokenizer:
    return HFTokenizer.from_directory(tokenizer_dir)


_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class HermesTestParser:
    """Minimal Hermes-format parser for tests: ``<tool_call>{json}</tool_call>`` blocks."""

    name = "hermes-test"

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        text = text.removesuffix("<|im_end|>")
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        for index, match in enumerate(_CALL.finditer(text)):
            raw = match.group(1)
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                errors.append(
                    ToolParseError("invalid_json", str(exc), index, match.start(), match.end())
                )
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                errors.append(
                    ToolParseError("missing_name", "no name", index, match.start(), match.end())
                )
                continue
            args = obj.get("arguments", {})
            raw_args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parsed = args if isinstance(args, dict) else None
            calls.append(ParsedToolCall(name=obj["name"], arguments=parsed, raw_arguments=raw_args))
        first = text.find("<tool_call>")
        content = text if first < 0 else text[:first].rstrip("\n")
        return ParsedTurn(content=content or None, tool_calls=calls, errors=errors)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        parts = [content] if content else []
        for call in tool_calls:
            body = json.dumps(
                {"name": call.name, "arguments": json.loads(call.raw_arguments)},
                ensure_ascii=False,
            )
            parts.append(f"<tool_call>\n{body}\n</tool_call>")
        return "\n".join(parts)

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> Any:
        raise NotImplementedError("the test parser does not stream")


@pytest.fixture
def parser() -> HermesTestParser:
    return HermesTestParser()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def chatml() -> Iterator[str]:
    return CHATML
