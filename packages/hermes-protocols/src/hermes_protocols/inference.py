"""Inference vocabulary: sampling parameters, chat (phase 1) and token (phase 2) backends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from hermes_protocols.json_types import JSONObject
from hermes_protocols.messages import Message
from hermes_protocols.tokens import LogprobMode, _floats, _ints
from hermes_protocols.tools import ToolSchema

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "abort"]


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class SamplingParams:
    """Sampling parameters for one generation. ``max_tokens`` is per turn, not per rollout."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 1024
    seed: int | None = None
    stop: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    logprob_mode: LogprobMode = "sampled"


@attrs.frozen(slots=True)
class Usage:
    """Token usage of one request."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@attrs.frozen(slots=True)
class ChatChoice:
    """One completion choice from a chat backend; ``message`` is an assistant message."""

    message: Message
    finish_reason: FinishReason


def _choices(values: Iterable[ChatChoice]) -> tuple[ChatChoice, ...]:
    return tuple(values)


@attrs.frozen(slots=True)
class ChatResult:
    """A chat backend's answer: ``n`` choices and the request's usage."""

    choices: tuple[ChatChoice, ...] = attrs.field(converter=_choices)
    usage: Usage = Usage()


@attrs.frozen(slots=True)
class Generation:
    """A token backend's answer: generated ids (EOS included when sampled) with logprobs.

    ``missing_logprobs`` lists the positions (indices into ``ids``) the engine returned no
    logprob for (llama-server omits tokens that end inside a UTF-8 character); their
    ``logprobs`` entry is NaN. The ids are complete either way.
    """

    ids: tuple[int, ...] = attrs.field(converter=_ints)
    logprobs: tuple[float, ...] = attrs.field(converter=_floats)
    finish_reason: FinishReason
    logprob_mode: LogprobMode = "raw"
    missing_logprobs: tuple[int, ...] = attrs.field(default=(), converter=_ints)

    def __attrs_post_init__(self) -> None:
        if len(self.ids) != len(self.logprobs):
            raise ValueError(f"{len(self.ids)} generated ids but {len(self.logprobs)} logprobs")
        if any(not 0 <= p < len(self.ids) for p in self.missing_logprobs):
            raise ValueError(f"missing_logprobs {self.missing_logprobs} outside the generation")


@runtime_checkable
class ChatBackend(Protocol):
    """Phase 1: an OpenAI-compatible chat completion with tools; the server parses tool calls."""

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        sampling: SamplingParams,
        n: int = 1,
        extra_body: JSONObject | None = None,
    ) -> ChatResult: ...


@runtime_checkable
class TokenBackend(Protocol):
    """Phase 2: prompt ids in, generated ids + per-token logprobs + finish reason out."""

    async def generate(
        self, prompt_ids: Sequence[int], *, sampling: SamplingParams
    ) -> Generation: ...


@runtime_checkable
class Tokenizer(Protocol):
    """Ids <-> text, without adding special tokens unless asked."""

    @property
    def eos_token_id(self) -> int: ...

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@runtime_checkable
class ChatTemplate(Protocol):
    """Renders messages (and tool schemas) to the exact prompt text a model family expects."""

    def render(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema] = (),
        add_generation_prompt: bool = False,
    ) -> str: ...
