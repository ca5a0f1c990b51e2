"""The token ledger: sampler ids are the source of truth, bridges are rendered from new messages.

1. The first prompt is rendered once (with the generation prompt) and tokenized once.
2. Each generation is appended as trainable ids with the sampler's logprobs (EOS included).
3. Tool results are appended as non-trainable *bridge* ids: the new messages are rendered after a
   fixed dummy prefix ``[user, assistant(MARK)]`` and the text after the dummy assistant's content
   is kept. That text starts with what the template emits at the end of an assistant turn
   (``<|im_end|>\\n`` for ChatML); the part the model already sampled (its stop token) is removed,
   the rest (``\\n``) stays in the bridge. Any end-of-turn id the model sampled (the set is
   explicit: ``end_token_ids``) stands for the template's end-of-turn token this way. History is
   never re-rendered.
4. :meth:`TokenLedger.drift` re-renders the final conversation, re-tokenizes it and aligns it
   with the trace. A differing region whose text is the same on both sides is a non-canonical
   tokenization the model sampled (inherent, never drift); the others are real drift.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence

from hermes_protocols import (
    ChatTemplate,
    DriftReport,
    Generation,
    LogprobMode,
    Message,
    Tokenizer,
    TokenTrace,
    ToolCall,
    ToolSchema,
)

from hermes_loop.chat_template import ChatTemplateError

_MARK = "hermes-bridge-marker-7f3a"
_DUMMY_PREFIX = (Message.user("hermes-bridge-user"), Message.assistant(_MARK))
MAX_DRIFT_POSITIONS = 32
#: differing regions separated by at most this many equal ids are judged as one region
_MERGE_GAP = 4
#: equal ids on each side of a region decoded with it (a UTF-8 character spans up to 4 bytes)
_CONTEXT = 3


class TemplateBridge:
    """Renders the text that follows a finished assistant turn, from only the new messages."""

    def __init__(self, template: ChatTemplate, tools: Sequence[ToolSchema] = ()) -> None:
        self._template = template
        self._tools = tuple(tools)
        if self._tools and self._tools_only_in_header(template, self._tools):
            # rendering the tool schemas every turn is the bridge's main cost; skip it when the
            # template's output after the prefix provably does not depend on them
            self._tools = ()
        base = template.render(_DUMMY_PREFIX, tools=self._tools)
        cut = base.rfind(_MARK)
        if cut < 0:
            raise ChatTemplateError(
                "the chat template drops assistant content; the token bridge cannot find where "
                "an assistant turn ends"
            )
        self._base = base
        #: text the template emits after an assistant turn's content, e.g. ``<|im_end|>\n``
        self.turn_end = base[cut + len(_MARK) :]

    @staticmethod
    def _tools_only_in_header(template: ChatTemplate, tools: tuple[ToolSchema, ...]) -> bool:
        probe = (
            Message.assistant("x", (ToolCall("probe_1", tools[0].name, "{}"),)),
            Message.tool("probe result", "probe_1", tools[0].name),
            Message.user("probe user"),
        )
        suffixes = []
        for with_tools in (tools, ()):
            base = template.render(_DUMMY_PREFIX, tools=with_tools)
            full = template.render(
                (*_DUMMY_PREFIX, *probe), tools=with_tools, add_generation_prompt=True
            )
            if not full.startswith(base):
                return False
            suffixes.append((base[base.rfind(_MARK) :], full[len(base) :]))
        return suffixes[0] == suffixes[1]

    def after_turn(self, new_messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """Text following the assistant content: the turn end, ``new_messages``, gen prompt."""
        full = self._template.render(
            (*_DUMMY_PREFIX, *new_messages),
            tools=self._tools,
            add_generation_prompt=add_generation_prompt,
        )
        if not full.startswith(self._base):
            raise ChatTemplateError(
                "the chat template rewrites earlier turns when messages are appended; "
                "it cannot be bridged token-exactly"
            )
        return self.turn_end + full[len(self._base) :]


def template_end_token(tokenizer: Tokenizer, turn_end: str) -> int | None:
    """The token a template's turn end starts with (``<|im_end|>`` in ``<|im_end|>\\n``), or
    ``None`` when the turn end is empty or starts with whitespace (no end-of-turn token)."""
    first = tokenizer.encode(turn_end)[:1]
    if not first:
        return None
    text = tokenizer.decode(first)
    if not text.strip() or not turn_end.startswith(text):
        return None
    return first[0]


def default_end_token_ids(tokenizer: Tokenizer, turn_end: str) -> frozenset[int]:
    """The tokenizer's EOS plus the template's end-of-turn token (:func:`template_end_token`)."""
    return _end_ids(tokenizer.eos_token_id, template_end_token(tokenizer, turn_end))


def _end_ids(eos: int, marker: int | None) -> frozenset[int]:
    return frozenset((eos,) if marker is None else (eos, marker))


class TokenLedger:
    """Accumulates the token trace of one rollout (ids, loss mask, logprobs, aligned).

    ``end_token_ids`` are the ids that end an assistant turn (default: the tokenizer's EOS and
    the template's end-of-turn token, :func:`default_end_token_ids`). A generation ending in any
    of them is treated as ending with the template's end-of-turn token: the bridge continues
    after it, and the drift check compares that position with the template's token.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        template: ChatTemplate,
        tools: Sequence[ToolSchema] = (),
        *,
        bridge: TemplateBridge | None = None,
        end_token_ids: Iterable[int] | None = None,
    ) -> None:
        self._tok = tokenizer
        self._template = template
        self._tools = tuple(tools)
        self._bridge = bridge if bridge is not None else TemplateBridge(template, tools)
        turn_end = self._bridge.turn_end
        self._marker_id = template_end_token(tokenizer, turn_end)
        self._marker_text = "" if self._marker_id is None else tokenizer.decode([self._marker_id])
        #: the ids that end an assistant turn
        self.end_ids: frozenset[int] = (
            _end_ids(tokenizer.eos_token_id, self._marker_id)
            if end_token_ids is None
            else frozenset(end_token_ids)
        )
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        #: trainable positions the engine returned no logprob for (NaN in :attr:`logprobs`)
        self.missing_logprobs: list[int] = []
        #: the logprob modes the generations returned (one, unless the engine changed)
        self.logprob_modes: set[LogprobMode] = set()
        #: positions where a sampled end id other than the template's stands for it
        self._stand_ins: list[int] = []
        self._last_stop_text = ""
        self._ends_with_generation = False

    def __len__(self) -> int:
        return len(self.ids)

    def start(self, messages: Sequence[Message]) -> list[int]:
        """Render and tokenize the first prompt (once); return its ids."""
        prompt = self._tok.encode(self.prompt_text(messages))
        self.start_ids(prompt)
        return prompt

    def prompt_text(self, messages: Sequence[Message]) -> str:
        """The first prompt as text (rendered with the generation prompt)."""
        return self._template.render(messages, tools=self._tools, add_generation_prompt=True)

    def start_ids(self, prompt: Sequence[int]) -> None:
        """Start with the tokenized :meth:`prompt_text` (for callers that tokenize elsewhere)."""
        if self.ids:
            raise RuntimeError("the ledger already holds a prompt")
        self._append_context(prompt)

    def add_generation(self, generation: Generation) -> None:
        """Append sampled ids as trainable, with their logprobs (and missing positions)."""
        offset = len(self.ids)
        self.missing_logprobs.extend(offset + p for p in generation.missing_logprobs)
        self.logprob_modes.add(generation.logprob_mode)
        self.ids.extend(generation.ids)
        self.mask.extend([1] * len(generation.ids))
        self.logprobs.extend(generation.logprobs)
        last = generation.ids[-1] if generation.ids else None
        self._last_stop_text = self._stop_text(last, generation.finish_reason)
        self._ends_with_generation = True

    def _stop_text(self, last: int | None, finish_reason: str) -> str:
        """The start of the template's turn end that the sampled last token already stands for.

        An end id (:attr:`end_ids`) stands for the template's end-of-turn token, whichever one
        the model sampled (SmolLM2 may end with ``<|endoftext|>`` instead of ``<|im_end|>``);
        other tokens count only when the generation stopped on its own and the turn end starts
        with their text."""
        if last is None:
            return ""
        if last in self.end_ids:
            text = self._tok.decode([last])
            if self._bridge.turn_end.startswith(text):
                return text
            if self._marker_id is not None:
                self._stand_ins.append(len(self.ids) - 1)
            return self._marker_text
        if finish_reason == "stop":
            text = self._tok.decode([last])
            if text and self._bridge.turn_end.startswith(text):
                return text
        return ""

    def bridge_text(self, new_messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """The text to append after the last generation (minus the stop token it sampled)."""
        text = self._bridge.after_turn(new_messages, add_generation_prompt=add_generation_prompt)
        stop = self._last_stop_text
        if stop and text.startswith(stop):
            return text[len(stop) :]
        return text

    def add_messages(self, new_messages: Sequence[Message]) -> list[int]:
        """Append tool results (and the next generation prompt) as non-trainable bridge ids."""
        if not self._ends_with_generation:
            raise RuntimeError("bridges follow a generation; call add_generation first")
        ids = self._tok.encode(self.bridge_text(new_messages, add_generation_prompt=True))
        self.add_bridge_ids(ids)
        return ids

    def add_bridge_ids(self, ids: Sequence[int]) -> None:
        """Append already tokenized bridge ids (see :meth:`bridge_text`) as non-trainable."""
        if not self._ends_with_generation:
            raise RuntimeError("bridges follow a generation; call add_generation first")
        self._append_context(ids)

    def trace(self) -> TokenTrace:
        return TokenTrace(
            ids=self.ids,
            mask=self.mask,
            logprobs=self.logprobs,
            source="sampler",
            missing_logprobs=self.missing_logprobs,
            logprob_mode=next(iter(self.logprob_modes)) if len(self.logprob_modes) == 1 else None,
        )

    def drift(self, messages: Sequence[Message]) -> DriftReport:
        """Compare the trace with a re-render + re-tokenization of ``messages``."""
        ends_with_assistant = bool(messages) and messages[-1].role == "assistant"
        rendered = self._template.render(
            messages, tools=self._tools, add_generation_prompt=not ends_with_assistant
        )
        expected = self._tok.encode(rendered)
        actual = list(self.ids)
        if self._marker_id is not None:
            # the messages cannot say which end id the model sampled; the template writes its own
            for position in self._stand_ins:
                actual[position] = self._marker_id
        if ends_with_assistant and self._ends_with_generation:
            # the template closes the last turn (e.g. "\n" after <|im_end|>); the trace stops at
            # the sampled stop token, so close it the same way before comparing
            actual += self._tok.encode(self.bridge_text((), add_generation_prompt=False))
        return compare_ids(actual, expected, decode=self._tok.decode)

    def _append_context(self, ids: Sequence[int]) -> None:
        self.ids.extend(ids)
        self.mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self._ends_with_generation = False


def compare_ids(
    actual: Sequence[int],
    expected: Sequence[int],
    *,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> DriftReport:
    """Align the trace (``actual``) with the re-tokenization (``expected``) and judge each
    differing region: with ``decode``, a region decoding to the same text on both sides (and
    holding no U+FFFD from split characters) is non-canonical tokenization, not drift. A
    region counts ``max(len(trace side), len(retokenized side))`` mismatches, so one shifted
    id no longer turns every later position into a mismatch. Regions equal only through U+FFFD
    count as ``lossy_tokens``."""
    start = 0
    limit = min(len(actual), len(expected))
    while start < limit and actual[start] == expected[start]:
        start += 1
    end = 0
    while end < limit - start and actual[-1 - end] == expected[-1 - end]:
        end += 1
    a_mid = list(actual[start : len(actual) - end])
    e_mid = list(expected[start : len(expected) - end])
    positions: list[int] = []
    mismatches = noncanonical = regions = lossy = 0
    found = _regions(a_mid, e_mid, decode)
    for index, (i1, i2, j1, j2) in enumerate(found):
        # judge the text with up to _CONTEXT equal ids on each side (the same on both sides),
        # so a re-spelling that splits a multi-byte character decodes whole
        left = min(_CONTEXT, i1 - found[index - 1][1] if index else start + i1)
        after = found[index + 1][0] if index + 1 < len(found) else len(a_mid) + end
        right = min(_CONTEXT, after - i2)
        a_seg = list(actual[start + i1 - left : start + i2 + right])
        e_seg = list(expected[start + j1 - left : start + j2 + right])
        if decode is not None and _same_text(decode, a_seg, e_seg):
            noncanonical += i2 - i1
            regions += 1
            continue
        if decode is not None and _same_text(decode, a_seg, e_seg, lossy=True):
            lossy += i2 - i1
            continue
        mismatches += max(i2 - i1, j2 - j1)
        if len(positions) < MAX_DRIFT_POSITIONS:
            positions.append(start + i1)
    return DriftReport(
        mismatches=mismatches,
        length_delta=len(expected) - len(actual),
        positions=positions,
        noncanonical_tokens=noncanonical,
        noncanonical_regions=regions,
        lossy_tokens=lossy,
    )


def _same_text(
    decode: Callable[[Sequence[int]], str], a: list[int], e: list[int], *, lossy: bool = False
) -> bool:
    """Both sides decode to the same text, without (or, if ``lossy``, with) U+FFFD in it."""
    if not a or not e:
        return False
    text = decode(a)
    return (("\ufffd" in text) == lossy) and text == decode(e)


def _regions(
    a: list[int], e: list[int], decode: Callable[[Sequence[int]], str] | None
) -> list[tuple[int, int, int, int]]:
    """Differing regions ``(i1, i2, j1, j2)``; a region whose texts differ absorbs the next one
    when at most ``_MERGE_GAP`` equal ids lie between (one re-spelling can share an id by chance,
    e.g. ``HA RA H`` against ``H AR AH``)."""
    if not a and not e:
        return []
    matcher = difflib.SequenceMatcher(a=a, b=e, autojunk=False)
    found: list[tuple[int, int, int, int]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if found:
            p1, p2, q1, q2 = found[-1]
            close = i1 - p2 <= _MERGE_GAP
            if close and not (decode is not None and _same_text(decode, a[p1:p2], e[q1:q2])):
                found[-1] = (p1, i2, q1, j2)
                continue
        found.append((i1, i2, j1, j2))
    return found
