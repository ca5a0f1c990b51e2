"""What the loop generates with: a chat backend (phase 1) or a token backend + ledger (phase 2).

:class:`ChatModel` and :class:`TokenModel` are configurations; each rollout opens a session that
keeps that rollout's state (the message list, or the token ledger).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs
from hermes_protocols import (
    ChatBackend,
    ChatTemplate,
    ConfigError,
    DriftReport,
    JSONObject,
    Message,
    SamplingParams,
    TokenBackend,
    Tokenizer,
    TokenTrace,
    ToolCall,
    ToolCallParser,
    ToolSchema,
)
from hermes_protocols.convert import tools_to_openai

from hermes_loop.ignored_tools import IgnoredToolsCheck, check_tools_reach_prompt
from hermes_loop.ledger import TemplateBridge, TokenLedger
from hermes_loop.offload import run_sized
from hermes_loop.parsed_turns import turn_message
from hermes_loop.tool_calls import PendingCall, SchemaCache, validate_call


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of ``turn`` (1-based) in a rollout seeded with ``seed``.

    Turn 1 keeps ``seed`` itself; later turns get distinct, reproducible seeds, so a sampler
    that restarts its random stream per request never replays turn 1's draws.
    """
    if turn <= 1:
        return seed
    digest = hashlib.sha256(f"{seed}:{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def turn_sampling(sampling: SamplingParams, turn: int, max_tokens: int) -> SamplingParams:
    """``sampling`` for one turn: its token budget and its own seed (when a seed is set)."""
    seed = None if sampling.seed is None else turn_seed(sampling.seed, turn)
    if sampling.max_tokens == max_tokens and sampling.seed == seed:
        return sampling
    return attrs.evolve(sampling, max_tokens=max_tokens, seed=seed)


@attrs.frozen(slots=True)
class TurnOutput:
    """One generated assistant turn, its calls (validated) and its accounting."""

    message: Message
    calls: tuple[PendingCall, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


class Session(Protocol):
    """Per-rollout generation state; :meth:`start` once before the first turn."""

    async def start(self) -> None: ...

    def context_tokens(self) -> int: ...

    async def generate(self, turn: int, max_tokens: int) -> TurnOutput: ...

    async def add_tool_messages(self, messages: Sequence[Message]) -> None: ...

    async def finish(
        self, messages: Sequence[Message]
    ) -> tuple[TokenTrace | None, DriftReport | None]: ...


def _tool_map(tools: Sequence[ToolSchema]) -> dict[str, ToolSchema]:
    return {t.name: t for t in tools}


class CallIds:
    """Tool-call ids of one rollout: unique and deterministic.

    A call keeps the id the model (Mistral v11+, Kimi) or the server gave it when that id is not
    empty and not taken yet in this rollout; otherwise it gets ``call_{turn}_{index}`` (index in
    emission order within the turn, suffixed ``_2``, ``_3``... in the unlikely case that is
    taken). The same rollout always gets the same ids.
    """

    def __init__(self) -> None:
        self._used: set[str] = set()

    def assign(self, turn: int, index: int, given: str | None = None) -> str:
        if given and given not in self._used:
            chosen = given
        else:
            chosen = base = f"call_{turn}_{index}"
            suffix = 2
            while chosen in self._used:
                chosen, suffix = f"{base}_{suffix}", suffix + 1
        self._used.add(chosen)
        return chosen


@attrs.define
class ChatModel:
    """Phase 1: an OpenAI-compatible chat backend; the server parses tool calls.

    ``extra_body`` is sent untouched with every request (provider preferences, etc.). With a
    ``parser`` the run notices (and says once) when the server evidently ignores ``tools``
    (:mod:`hermes_loop.ignored_tools`); ``parse_content`` then reads tool calls from
    ``content`` client-side, the explicit fallback for such servers.
    """

    backend: ChatBackend
    extra_body: JSONObject | None = None
    parser: ToolCallParser | None = None
    parse_content: bool = False
    _schemas: SchemaCache = attrs.field(factory=SchemaCache, init=False)
    _check: IgnoredToolsCheck | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.parse_content and self.parser is None:
            raise ConfigError("ChatModel.parse_content needs a parser (the run's --parser)")
        if self.parser is not None:
            self._check = IgnoredToolsCheck(self.parser, parse_content=self.parse_content)

    @property
    def ignored_tools(self) -> IgnoredToolsCheck | None:
        """The run's check for a server that ignores ``tools`` (``None`` without a parser)."""
        return self._check

    async def check_tools(self, tools: Sequence[ToolSchema]) -> bool | None:
        """Whether the server renders ``tools`` into the prompt; warns once when it does not
        (:func:`hermes_loop.ignored_tools.check_tools_reach_prompt`)."""
        return await check_tools_reach_prompt(self.backend, tools, extra_body=self.extra_body)

    def open(
        self, messages: list[Message], tools: Sequence[ToolSchema], sampling: SamplingParams
    ) -> Session:
        return _ChatSession(self, messages, tuple(tools), sampling)


class _ChatSession:
    def __init__(
        self,
        model: ChatModel,
        messages: list[Message],
        tools: tuple[ToolSchema, ...],
        sampling: SamplingParams,
    ) -> None:
        self._model = model
        self._messages = messages
        self._tools = tools
        self._by_name = _tool_map(tools)
        self._openai_tools: list[JSONObject] = tools_to_openai(tools) if tools else []
        self._sampling = sampling
        self._context = 0
        self._ids = CallIds()

    async def start(self) -> None:
        return None

    def context_tokens(self) -> int:
        return self._context

    async def generate(self, turn: int, max_tokens: int) -> TurnOutput:
        sampling = turn_sampling(self._sampling, turn, max_tokens)
        result = await self._model.backend.chat(
            self._messages,
            tools=self._tools,
            sampling=sampling,
            n=1,
            extra_body=self._model.extra_body,
        )
        choice = result.choices[0]
        usage = result.usage
        self._context = usage.prompt_tokens + usage.completion_tokens
        check = self._model.ignored_tools
        parsed = (
            check.observe(choice.message, self._openai_tools)
            if check is not None and self._tools
            else None
        )
        if parsed is not None:
            message, calls = turn_message(
                parsed, turn, self._ids.assign, self._by_name, self._model._schemas
            )
        else:
            message = self._with_unique_ids(turn, choice.message)
            calls = tuple(
                validate_call(c, self._by_name, self._model._schemas) for c in message.tool_calls
            )
        return TurnOutput(
            message=message,
            calls=calls,
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )

    def _with_unique_ids(self, turn: int, message: Message) -> Message:
        """The server's message, with empty or repeated tool-call ids replaced (see CallIds)."""
        fixed: list[ToolCall] = []
        for index, call in enumerate(message.tool_calls):
            chosen = self._ids.assign(turn, index, call.id)
            fixed.append(call if chosen == call.id else ToolCall(chosen, call.name, call.arguments))
        if all(a is b for a, b in zip(message.tool_calls, fixed, strict=True)):
            return message
        return attrs.evolve(message, tool_calls=tuple(fixed))

    async def add_tool_messages(self, messages: Sequence[Message]) -> None:
        return None

    async def finish(
        self, messages: Sequence[Message]
    ) -> tuple[TokenTrace | None, DriftReport | None]:
        return None, None


def _id_set(ids: Iterable[int] | None) -> frozenset[int] | None:
    return None if ids is None else frozenset(ids)


@attrs.define
class TokenModel:
    """Phase 2: exact tokens. The ledger keeps the sampler's ids; the parser only reads text.

    ``end_token_ids`` are the ids that end an assistant turn (default: the tokenizer's EOS plus
    the template's end-of-turn token, e.g. ``<|im_end|>``). A trailing end id never reaches the
    parser, and the bridge after it continues the template's turn end. Pass every id the
    backend stops on (``EmbeddedModel.end_token_ids`` for the embedded model; the model's
    ``generation_config.json`` ``eos_token_id`` list for servers).
    ``check_drift`` re-renders the final conversation once per rollout to report drift.
    ``engine`` says which engine computes the logprobs and what reproduces them
    (:mod:`hermes_loop.engine`); every rollout's ``sampling`` record carries it.
    """

    backend: TokenBackend
    tokenizer: Tokenizer
    template: ChatTemplate
    parser: ToolCallParser
    check_drift: bool = True
    end_token_ids: frozenset[int] | None = attrs.field(
        default=None, converter=_id_set, kw_only=True
    )
    engine: JSONObject | None = attrs.field(default=None, kw_only=True)
    _schemas: SchemaCache = attrs.field(factory=SchemaCache, init=False)
    _bridges: dict[tuple[ToolSchema, ...], TemplateBridge] = attrs.field(factory=dict, init=False)

    def bridge(self, tools: tuple[ToolSchema, ...]) -> TemplateBridge:
        """The template bridge for this tool list (computed once, then reused)."""
        found = self._bridges.get(tools)
        if found is None:
            if len(self._bridges) > 256:
                self._bridges.clear()
            found = self._bridges[tools] = TemplateBridge(self.template, tools)
        return found

    def open(
        self, messages: list[Message], tools: Sequence[ToolSchema], sampling: SamplingParams
    ) -> Session:
        return _TokenSession(self, messages, tuple(tools), sampling)


class _TokenSession:
    def __init__(
        self,
        model: TokenModel,
        messages: list[Message],
        tools: tuple[ToolSchema, ...],
        sampling: SamplingParams,
    ) -> None:
        self._model = model
        self._tools = tools
        self._by_name = _tool_map(tools)
        self._openai_tools: list[JSONObject] = tools_to_openai(tools)
        self._sampling = sampling
        self._ids = CallIds()
        self.ledger = TokenLedger(
            model.tokenizer,
            model.template,
            tools,
            bridge=model.bridge(tools),
            end_token_ids=model.end_token_ids,
        )
        self._messages = messages

    async def start(self) -> None:
        """Render the first prompt and tokenize it once (in a thread when it is long)."""
        text = self.ledger.prompt_text(self._messages)
        self.ledger.start_ids(await run_sized(self._model.tokenizer.encode, text, len(text)))

    def context_tokens(self) -> int:
        return len(self.ledger)

    async def generate(self, turn: int, max_tokens: int) -> TurnOutput:
        prompt_tokens = len(self.ledger)
        sampling = turn_sampling(self._sampling, turn, max_tokens)
        generation = await self._model.backend.generate(self.ledger.ids, sampling=sampling)
        self.ledger.add_generation(generation)
        ids = generation.ids
        if ids and ids[-1] in self.ledger.end_ids:
            ids = ids[:-1]
        text = await run_sized(self._model.tokenizer.decode, ids, len(ids) * 4)
        parsed = self._model.parser.parse(text, tools=self._openai_tools)
        message, calls = turn_message(
            parsed, turn, self._ids.assign, self._by_name, self._model._schemas
        )
        return TurnOutput(
            message=message,
            calls=calls,
            finish_reason=generation.finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(generation.ids),
        )

    async def add_tool_messages(self, messages: Sequence[Message]) -> None:
        text = self.ledger.bridge_text(messages, add_generation_prompt=True)
        ids = await run_sized(self._model.tokenizer.encode, text, len(text))
        self.ledger.add_bridge_ids(ids)

    async def finish(
        self, messages: Sequence[Message]
    ) -> tuple[TokenTrace | None, DriftReport | None]:
        drift = None
        if self._model.check_drift:
            drift = await run_sized(self.ledger.drift, messages, len(self.ledger) * 4)
        return self.ledger.trace(), drift
