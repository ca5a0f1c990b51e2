"""Phase 1 masks: only the model's own turns train, each up to its EOS (issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hermes_atropos_env.retokenize import ChatTemplateRetokenizer
from hermes_protocols import AgentResult, Message, StopReason

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] or '' }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def chatml_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A byte-level tokenizer whose ChatML markers are single special tokens, EOS ``<|im_end|>``
    (as SmolLM2's)."""
    from hermes_loop import HFTokenizer
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.chat_template = CHATML
    path: Path = tmp_path_factory.mktemp("chatml")
    tokenizer.save_pretrained(str(path))
    return HFTokenizer.from_directory(path)


def _runs(ids: list[int], mask: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for index, (token, on) in enumerate(zip(ids, mask, strict=True)):
        if on and (index == 0 or not mask[index - 1]):
            runs.append([])
        if on:
            runs[-1].append(token)
    return runs


def test_a_demonstrations_turns_are_prompt_and_the_newline_after_eos_is_not_trained(
    chatml_tokenizer: Any,
) -> None:
    tokenizer = chatml_tokenizer
    messages = [
        Message.system("You use the terminal."),
        Message.user("Demo task: say A."),
        Message.assistant("demo answer A"),
        Message.user("Demo task: say B."),
        Message.assistant("demo answer B"),
        Message.user("Your task: say C."),
        Message.assistant("my answer C"),
        Message.user("Now say D."),
        Message.assistant("my answer D"),
    ]
    result = AgentResult(messages=messages, stop_reason=StopReason.FINAL_ANSWER, turns=2)
    retokenize = ChatTemplateRetokenizer(tokenizer, tokenizer.chat_template)
    trace = retokenize(result)
    assert trace.source == "retokenized"
    runs = [tokenizer.decode(run) for run in _runs(list(trace.ids), list(trace.mask))]
    assert runs == ["my answer C<|im_end|>", "my answer D<|im_end|>"]
    # without a demonstration every assistant turn is the model's own
    alone = AgentResult([messages[0], *messages[5:]], StopReason.MAX_TURNS, turns=2)
    trace = retokenize(alone)
    assert len(_runs(list(trace.ids), list(trace.mask))) == 2
