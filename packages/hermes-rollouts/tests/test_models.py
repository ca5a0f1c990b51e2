"""The model helpers apps use: the HF tokenizer directory of a spec, and a token model over an
app's own backend with the tokenizer directory's end ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from hermes_parsers import get_parser
from hermes_protocols import Generation, SamplingParams
from hermes_rollouts import ModelSpec, TokenizerDir, hf_tokenizer_dir
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_token_server_uses_its_tokenizer_option() -> None:
    spec = ModelSpec(server_type="vllm", base_url="http://x", model="m", tokenizer="/tok")
    assert hf_tokenizer_dir(spec) == Path("/tok")
    assert hf_tokenizer_dir(ModelSpec(server_type="openai", base_url="http://x")) is None


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate([*alphabet, "<|im_start|>", "<|im_end|>", "<x>"])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.add_special_tokens(["<|im_start|>", "<|im_end|>", "<x>"])
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.save(str(tmp_path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "chat_template": CHATML,
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    # a second end id only the directory knows
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [vocab["<|im_end|>"], vocab["<x>"]]}), encoding="utf-8"
    )
    return tmp_path


class NoBackend:
    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        raise AssertionError("not called")


def test_a_token_model_over_an_app_backend_ends_turns_on_every_end_id(
    tokenizer_dir: Path,
) -> None:
    async def load(path: str | Path | None) -> None:
        pass

    loaded = anyio.run(TokenizerDir.load, str(tokenizer_dir))
    handle = loaded.model(NoBackend(), get_parser("hermes"), name="mine", load_lora=load)
    end = {loaded.tokenizer.encode("<|im_end|>")[0], loaded.tokenizer.encode("<x>")[0]}
    assert loaded.end_ids == end
    assert handle.model.end_token_ids == end  # type: ignore[union-attr]
    assert (handle.name, handle.load_lora, handle.tokenizer) == ("mine", load, loaded.tokenizer)
    assert handle.template is not None
