"""Phase 1 token traces: rebuild ids from the final messages with a HF chat template.

This replaces atroposlib's ``tokenize_for_trainer`` (broken on transformers 5, where
``apply_chat_template`` returns a mapping): the template is rendered to text and encoded, and
assistant turns are marked trainable by rendering prefixes. The trace's ``source`` is
``"retokenized"``: never sampler-exact, and it carries no logprobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hermes_protocols import Message, TokenTrace
from hermes_protocols.convert import messages_to_openai


class HFChatTokenizer(Protocol):
    """The part of a ``transformers`` tokenizer this module uses."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def encode(self, text: str, **kwargs: Any) -> list[int]: ...


class ChatTemplateRetokenizer:
    """Callable ``messages -> TokenTrace`` over a HF tokenizer's chat template."""

    def __init__(self, tokenizer: HFChatTokenizer) -> None:
        self._tokenizer = tokenizer

    def _ids(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> list[int]:
        text = self._tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}")
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def __call__(self, messages: Sequence[Message]) -> TokenTrace:
        wire = messages_to_openai(messages)
        ids = self._ids(wire, generation_prompt=False)
        mask = [0] * len(ids)
        for index, message in enumerate(messages):
            if message.role != "assistant":
                continue
            start = len(self._ids(wire[:index], generation_prompt=True)) if index else 0
            end = min(len(self._ids(wire[: index + 1], generation_prompt=False)), len(ids))
            for position in range(start, end):
                mask[position] = 1
        return TokenTrace(ids=ids, mask=mask, logprobs=[0.0] * len(ids), source="retokenized")
