"""Phase 1 token traces: rebuild ids from the final messages with the model's chat template.

This replaces atroposlib's ``tokenize_for_trainer`` (broken on transformers 5, where
``apply_chat_template`` returns a mapping): the conversation is rendered to text with a
:class:`~hermes_protocols.ChatTemplate`, encoded with a :class:`~hermes_protocols.Tokenizer`,
and the model's own turns (the last ``AgentResult.turns`` assistant messages; a prefill
demonstration's assistant turns are prompt) are marked trainable by rendering prefixes, up to
and including the turn's last EOS: what the template adds after it (ChatML's newline) was never
sampled, as in phase 2. The trace's ``source`` is ``"retokenized"``: never sampler-exact, and it
carries no logprobs (0.0 everywhere).
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_protocols import AgentResult, ChatTemplate, Message, Tokenizer, TokenTrace, ToolSchema


class ChatTemplateRetokenizer:
    """Callable ``AgentResult -> TokenTrace`` (``source="retokenized"``)."""

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

    def _turn_end(self, ids: Sequence[int], start: int, end: int) -> int:
        """``end`` cut back to just after the span's last EOS (when it has one)."""
        eos = self._tokenizer.eos_token_id
        for position in range(end - 1, start - 1, -1):
            if ids[position] == eos:
                return position + 1
        return end

    def __call__(self, result: AgentResult) -> TokenTrace:
        messages = result.messages
        ids = self._tokenizer.encode(self._template.render(messages, tools=self._tools))
        mask = [0] * len(ids)
        assistant = [i for i, message in enumerate(messages) if message.role == "assistant"]
        own = assistant[len(assistant) - result.turns :] if result.turns else []
        for index in own:
            start = self._length(messages[:index], generation_prompt=True) if index else 0
            end = min(self._length(messages[: index + 1], generation_prompt=False), len(ids))
            end = self._turn_end(ids, start, end)
            mask[start:end] = [1] * max(0, end - start)
        return TokenTrace(ids=ids, mask=mask, logprobs=[0.0] * len(ids), source="retokenized")
