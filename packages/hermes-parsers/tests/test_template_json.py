"""The hermes/longcat one-shot fast path: whenever it answers, it answers exactly what the
state machine answers; it answers for every text the renderer writes; streams stay cheap."""

from __future__ import annotations

from typing import Any

import pytest
from hermes_parsers import FormatSpec, get_parser
from hermes_parsers._stream import CompiledSpec, DelimitedStream
from hermes_parsers._template_json import template_json_parser
from hermes_parsers.formats.hermes import HERMES, LONGCAT
from hermes_protocols.parsing import ParsedToolCall, ParsedTurn
from hypothesis import given, settings
from hypothesis import strategies as st

SPECS = {"hermes": HERMES, "longcat": LONGCAT}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def machine(spec: FormatSpec, text: str) -> ParsedTurn:
    stream = DelimitedStream(spec, CompiledSpec(spec), {}, reasoning_open=False)
    stream.feed(text)
    return stream.finish()[1]


def fragments(spec: FormatSpec) -> st.SearchStrategy[str]:
    """Delimiter soup: markers, JSON punctuation, template pieces, whitespace, text."""
    assert spec.reasoning is not None
    assert spec.call_end is not None
    markers = [spec.call_start, spec.call_end, *spec.reasoning, "\n", "\n\n", " ", '"', "\\"]
    pieces = ['{"name": ', ', "arguments": ', "}", "{", '"f"', "[1]", "NaN", "x", "é"]
    return st.sampled_from(markers + pieces) | st.text(max_size=4)


def calls() -> st.SearchStrategy[list[ParsedToolCall]]:
    call = st.builds(
        lambda name, args: ParsedToolCall(name, args, ""),
        st.text(min_size=1, max_size=6).filter(lambda s: s == s.strip()),
        st.dictionaries(st.text(max_size=6), JSON, max_size=3),
    )
    return st.lists(call, max_size=3)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fast_path_agrees_with_the_state_machine(name: str) -> None:
    spec = SPECS[name]
    fast = template_json_parser(spec)
    parser = get_parser(name)
    markers = [spec.call_start, spec.call_end]

    @settings(max_examples=5 * settings.default.max_examples)  # 500; 50 with dev
    @given(
        st.one_of(st.none(), st.text(max_size=10)),
        st.text(max_size=10),
        calls(),
        st.lists(st.tuples(st.integers(0, 10_000), fragments(spec)), max_size=4),
        st.booleans(),
    )
    def prop(
        reasoning: str | None,
        content: str,
        tool_calls: list[ParsedToolCall],
        edits: list[tuple[int, str]],
        strings_with_markers: bool,
    ) -> None:
        if strings_with_markers and tool_calls:
            # Closing and opening markers inside JSON strings: still one call each.
            first = tool_calls[0]
            tool_calls[0] = ParsedToolCall(
                first.name, {**(first.arguments or {}), "m": "".join(markers)}, ""
            )
        try:
            text = parser.render(content=content, tool_calls=tool_calls, reasoning=reasoning)
        except ValueError:
            return
        # Rendered text always takes the fast path, and gives back what was rendered.
        got = fast(text)
        assert got is not None
        assert got == machine(spec, text)
        assert [c.arguments for c in got.tool_calls] == [c.arguments for c in tool_calls]
        # Edited text: the fast path either declines or agrees exactly.
        for at, piece in edits:
            at %= len(text) + 1
            text = text[:at] + piece + text[at:]
        got = fast(text)
        if got is not None:
            assert got == machine(spec, text)
        assert parser.parse(text) == machine(spec, text)

    prop()


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\nafter',
        '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>',
        '<tool_call>\n{"name": "", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": 1, "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "f", "arguments": {"a": }\n</tool_call>',
        '<tool_call> {"name": "f", "arguments": {}}\n</tool_call>',
        'hi <think>x</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
        "<think>never closed",
        '<tool_call>\n{"name": "f", "arguments": {"a": "</tool_call>',
    ],
)
def test_fast_path_declines_what_it_does_not_own(text: str) -> None:
    assert template_json_parser(HERMES)(text) is None
    assert get_parser("hermes").parse(text) == machine(HERMES, text)


def test_marker_inside_a_string_is_body_text() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {"a": "</tool_call><think>"}}\n</tool_call>'
    turn = template_json_parser(HERMES)(text)
    assert turn is not None
    assert turn == machine(HERMES, text)
    assert turn.tool_calls[0].arguments == {"a": "</tool_call><think>"}


def test_feed_returns_a_fresh_list_and_refuses_after_finish() -> None:
    stream = get_parser("hermes", stream_batch=1000).stream()
    first: list[Any] = stream.feed("abc")
    first.append("caller's own")
    assert stream.feed("def") == []
    events, turn = stream.finish()
    assert turn.content == "abcdef"
    assert len(events) == 1
    with pytest.raises(RuntimeError):
        stream.feed("x")
    assert stream.finish()[1] == turn
