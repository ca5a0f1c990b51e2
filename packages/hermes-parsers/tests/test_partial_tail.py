"""``partial_tail`` with the markers' first characters finds the same held suffix as the
plain scan over every suffix length."""

from __future__ import annotations

from hermes_parsers._spec import first_chars, partial_tail, prefixes
from hypothesis import given, settings
from hypothesis import strategies as st

MARKERS = ["<tool_call>", "<think>", "</tool_call>", "[TOOL_CALLS]", "<｜tool▁calls▁begin｜>"]
PIECES = [*MARKERS, "<", "<t", "</", "</tool", "[T", "<｜", "a", "é", " "]


@settings(max_examples=500)
@given(
    st.lists(st.sampled_from(PIECES), max_size=6).map("".join),
    st.integers(0, 40),
    st.lists(st.sampled_from(MARKERS), min_size=1, max_size=3),
)
def test_first_char_search_matches_the_plain_scan(
    text: str, start: int, markers: list[str]
) -> None:
    start = min(start, len(text))
    held, longest = prefixes(markers), max(map(len, markers))
    fast = partial_tail(text, start, held, longest, first_chars(markers))
    assert fast == partial_tail(text, start, held, longest)
    assert text[len(text) - fast :] in held or fast == 0


def test_holds_the_longest_partial_marker() -> None:
    markers = ["<tool_call>", "<think>"]
    held, firsts = prefixes(markers), first_chars(markers)
    assert partial_tail("abc <tool_ca", 0, held, 11, firsts) == len("<tool_ca")
    assert partial_tail("a < b <th", 0, held, 11, firsts) == 3
    assert partial_tail("<tool_call>", 0, held, 11, firsts) == 0
    assert partial_tail("<to", 2, held, 11, firsts) == 0
