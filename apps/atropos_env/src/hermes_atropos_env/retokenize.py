"""Phase 1 token traces: rebuild ids from the final messages with the model's chat template.

This replaces atroposlib's ``tokenize_for_trainer`` (broken on transformers 5, where
``apply_chat_template`` returns a mapping): the conversation is rendered to text with a
:class:`~hermes_protocols.ChatTemplate`, encoded with a :class:`~hermes_protocols.Tokenizer`,
and assistant turns are marked trainable by rendering prefixes. The trace's ``source`` is
``"retokenized"``: never sampler-exact, and it carries no logprobs (0.0 everywhere).
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols import ChatTemplate, Message, Tokenizer, TokenTrace, ToolSchema


class ChatTemplateRetokenizer:
    """Callable ``messages -> TokenTrace`` (``source="retokenized"``)."""

    def __init__(
        self, tokenizer: Tokenizer, template: ChatTemplate, tools: Sequence[ToolSchema] = ()
    ) -> None:
        self._tokenizer = tokenizer
        self._template = template
        self._tools = tuple(tools)

    def _length(self, messages: Sequence[Message], *, generation_prompt: bool) -> int:
        text = self._template.render(
            messages, tools=self._tools, add_generation_prompt=generation_prompt
        )
        return len(self._tokenizer.encode(text))

    def __call__(self, messages: Sequence[Message]) -> TokenTrace:
        text = self._template.render(messages, tools=self._tools)
        ids = self._tokenizer.encode(text)
        mask = [0] * len(ids)
        for index, message in enumerate(messages):
            if message.role != "assistant":
                continue
            start = self._length(messages[:index], generation_prompt=True) if index else 0
            end = min(self._length(messages[: index + 1], generation_prompt=False), len(ids))
            mask[start:end] = [1] * max(0, end - start)
        return TokenTrace(ids=ids, mask=mask, logprobs=[0.0] * len(ids), source="retokenized")
