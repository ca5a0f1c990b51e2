"""The five properties, for every registered format, with hypothesis (500 examples each)."""

from __future__ import annotations

import itertools
import keyword
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hermes_parsers import RenderError, get_parser
from hermes_protocols.parsing import ParsedToolCall, ParsedTurn
from hypothesis import event, given, settings
from hypothesis import strategies as st

#: 500 with the default and ci profiles, 50 with dev (nox -s unit)
EXAMPLES = settings(max_examples=5 * settings.default.max_examples)

_FIRST = "abcxyzABZ_"
_REST = "abz09_.-"
IDENT = st.builds(
    lambda a, b: a + "".join(b),
    st.sampled_from(_FIRST),
    st.lists(st.sampled_from(_REST), max_size=6),
)
PY_IDENT = st.builds(
    lambda a, b: a + "".join(b),
    st.sampled_from(_FIRST),
    st.lists(st.sampled_from("ab09_"), max_size=5),
).filter(lambda s: not keyword.iskeyword(s))
POOL = ("a", "Z", "0", " ", "\n", "\t", "é", "中", "😀", "\u2028", "\x00", '"', "\\", "{", "}", ":")
THINK = ("<think>", "</think>", "\n")


@attrs.frozen
class Case:
    """How to generate turns for one format."""

    delimiters: tuple[str, ...]
    names: st.SearchStrategy[str] = IDENT
    keys: st.SearchStrategy[str] | None = None
    content_with_calls: bool = True
    reasoning: bool = True
    ids: Callable[[str, int], st.SearchStrategy[str | None]] | None = None


def _kimi_ids(name: str, index: int) -> st.SearchStrategy[str | None]:
    return st.none() | st.integers(0, 99).map(lambda k: f"functions.{name}:{k}")


def _mistral_ids(name: str, index: int) -> st.SearchStrategy[str | None]:
    return st.none() | st.lists(st.sampled_from("aZ09x"), min_size=9, max_size=9).map("".join)


CASES: dict[str, Case] = {
    "hermes": Case(("<tool_call>", "</tool_call>", '"', "\\", *THINK)),
    "longcat": Case(("<longcat_tool_call>", "</longcat_tool_call>", '"', *THINK)),
    "mistral": Case(("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", '"')),
    "mistral_pre_v11": Case(("[TOOL_CALLS]", "[ARGS]", "[", "]", '"'), ids=_mistral_ids),
    "llama3_json": Case(
        ("{", "}", ";", "<|python_tag|>", '"'), content_with_calls=False, reasoning=False
    ),
    "llama4_json": Case(("{", ";", '"'), content_with_calls=False, reasoning=False),
    "pythonic": Case(
        ("[", "(", ")", "]", "=", '"', "'", "\\"),
        names=PY_IDENT,
        keys=PY_IDENT,
        content_with_calls=False,
        reasoning=False,
    ),
    "qwen3_coder": Case(
        (
            "<tool_call>",
            "</tool_call>",
            "<parameter=",
            "</parameter>",
            "<function=",
            "</function>",
            ">",
            *THINK,
        )
    ),
    "deepseek_v3": Case(
        ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "```", '"', *THINK)
    ),
    "deepseek_v31": Case(
        (
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁sep｜>",
            '"',
            *THINK,
        )
    ),
    "deepseek_v32": Case(
        (
            "<｜DSML｜function_calls>",
            "</｜DSML｜invoke>",
            "<｜DSML｜parameter",
            "</｜DSML｜parameter>",
            '"',
            *THINK,
        )
    ),
    "kimi_k2": Case(
        (
            "<|tool_calls_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            "<|tool_call_argument_begin|>",
            '"',
            *THINK,
        ),
        ids=_kimi_ids,
    ),
    "glm45": Case(("<tool_call>", "</tool_call>", "<arg_key>", "</arg_value>", *THINK)),
    "glm47": Case(("<tool_call>", "<arg_value>", "</arg_key>", "</arg_value>", *THINK)),
    "gpt_oss": Case(("<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|start|>", '"')),
}
FORMATS = sorted(CASES)


def texts(case: Case, max_parts: int = 5) -> st.SearchStrategy[str]:
    """Short text mixing sampled characters (unicode, quotes, backslashes), arbitrary
    characters and the format's own delimiters."""
    part = st.sampled_from(POOL + case.delimiters) | st.characters()
    return st.lists(part, max_size=max_parts).map("".join)


def json_values(case: Case) -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(10**6), 10**6)
        | st.sampled_from([10**20, -(2**63), 0.5, -0.0, 1e100, 2.5e-8])
        | st.floats(allow_nan=False, allow_infinity=False)
        | texts(case, 3)
    )
    keys = case.keys if case.keys is not None else texts(case, 2)
    flat = scalars | st.lists(scalars, max_size=2)
    return flat | st.dictionaries(keys, flat, max_size=2)


@attrs.frozen
class Draws:
    """Strategies built once per format (building them per example is slow)."""

    text: st.SearchStrategy[str]
    soup: st.SearchStrategy[str]
    keys: st.SearchStrategy[str]
    values: st.SearchStrategy[Any]


DRAWS = {
    name: Draws(
        texts(case),
        texts(case, 10),
        case.keys if case.keys is not None else texts(case, 2),
        json_values(case),
    )
    for name, case in CASES.items()
}


@st.composite
def turns(
    draw: st.DrawFn, name: str, values: st.SearchStrategy[Any] | None = None
) -> dict[str, Any]:
    case, d = CASES[name], DRAWS[name]
    # Distinct names per turn: the schema built from the arguments has one type per parameter.
    names = draw(st.lists(case.names, max_size=3, unique=True))
    calls = []
    for i, call_name in enumerate(names):
        value_strategy = d.values if values is None else values
        arguments = draw(st.dictionaries(d.keys, value_strategy, max_size=3))
        call_id = draw(case.ids(call_name, i)) if case.ids else None
        calls.append(ParsedToolCall(call_name, arguments, "", call_id))
    content = None if (calls and not case.content_with_calls) else draw(st.none() | d.text)
    reasoning = draw(st.none() | d.text) if case.reasoning else None
    return {"content": content, "tool_calls": calls, "reasoning": reasoning}


def _render(name: str, turn: dict[str, Any]) -> str | None:
    try:
        return get_parser(name).render(**turn)
    except RenderError:
        event("render refused a value the format cannot carry")
        return None


def _tools(turn: dict[str, Any], tools_from: Any) -> list[dict[str, Any]]:
    return tools_from([(c.name, c.arguments) for c in turn["tool_calls"]])


def _check_semantic(
    name: str, turn: dict[str, Any], parsed: ParsedTurn, json_eq: Callable[[Any, Any], bool]
) -> None:
    assert parsed.errors == ()
    assert parsed.content == (turn["content"] or None)
    assert parsed.reasoning == turn["reasoning"]
    assert len(parsed.tool_calls) == len(turn["tool_calls"])
    for want, got in zip(turn["tool_calls"], parsed.tool_calls, strict=True):
        assert got.name == want.name
        assert json_eq(got.arguments, want.arguments), (got.arguments, want.arguments)
        if CASES[name].ids and want.id is not None:
            assert got.id == want.id


def _splits(draw: st.DrawFn, text: str) -> list[str]:
    mode = draw(st.sampled_from(["random", "chars", "whole"]))
    if mode == "chars":
        return list(text)
    if mode == "whole" or not text:
        return [text]
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("name", FORMATS)
def test_round_trips_and_chunk_invariance(
    name: str, json_eq: Any, tools_from: Any, stream_turn: Any
) -> None:
    """Properties 1-3 on every example: semantic round trip, exact round trip, and the
    incremental parser's result equal to ``parse`` for random splits (one character at a time,
    random cut points inside delimiters, whole), on rendered text or on delimiter soup."""

    @EXAMPLES
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        turn = data.draw(turns(name))
        tools = _tools(turn, tools_from)
        parser = get_parser(name)
        text = _render(name, turn)
        if text is not None:
            parsed = parser.parse(text, tools=tools)
            # 1. semantic round trip
            _check_semantic(name, turn, parsed, json_eq)
            # 2. exact round trip
            again = parser.render(
                content=parsed.content, tool_calls=parsed.tool_calls, reasoning=parsed.reasoning
            )
            assert again == text
        # 3. chunk invariance (rendered text, or arbitrary text with the format's delimiters)
        if text is None or data.draw(st.booleans()):
            text = data.draw(DRAWS[name].soup)
        want = parser.parse(text, tools=tools)
        eager = get_parser(name, stream_batch=data.draw(st.sampled_from([1, 1, 3])))
        assert stream_turn(eager.stream(tools=tools), _splits(data.draw, text)) == want

    prop()


TYPED_STRINGS = st.sampled_from(
    ["1", "-2", "1.5", "true", "false", "True", "null", "None", "[1]", '{"a": 1}', "", " 3 "]
)
TYPED_VALUES = (
    TYPED_STRINGS
    | st.booleans()
    | st.none()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.sampled_from(["a", "b"]), TYPED_STRINGS, max_size=2)
)


@pytest.mark.parametrize("name", FORMATS)
def test_never_raises_and_schema_types(
    name: str, json_eq: Any, tools_from: Any, stream_turn: Any
) -> None:
    """Property 4 (arbitrary and truncated text never raises, streaming agrees, an unclosed
    call is a call or an error) and property 5 (with the tool schema, typed values come back
    with their types: a string that looks like a number stays a string)."""

    @EXAMPLES
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        turn = data.draw(turns(name, TYPED_VALUES))
        parser = get_parser(name)
        text = _render(name, turn)
        if text is not None:
            parsed = parser.parse(text, tools=_tools(turn, tools_from))
            _check_semantic(name, turn, parsed, json_eq)
            for want, got in zip(turn["tool_calls"], parsed.tool_calls, strict=True):
                assert got.arguments is not None
                for key, value in want.arguments.items():
                    assert type(got.arguments[key]) is type(value) or (
                        isinstance(value, float) and isinstance(got.arguments[key], int | float)
                    )
        text = text or ""
        cut = data.draw(st.integers(0, len(text)))
        noise = data.draw(DRAWS[name].soup)
        for candidate in (text[:cut], noise, text[:cut] + noise):
            parsed = parser.parse(candidate)
            assert isinstance(parsed, ParsedTurn)
            for error in parsed.errors:
                assert 0 <= error.start <= error.end <= len(candidate)
            for call in parsed.tool_calls:
                assert isinstance(call.arguments, dict)
            assert stream_turn(parser.stream(), [candidate]) == parsed
        # A truncated text fed one character at a time ends in the same state as parse.
        chars = get_parser(name, stream_batch=1).stream()
        assert stream_turn(chars, list(text[:cut])) == parser.parse(text[:cut])
        # Truncation never invents or reorders calls: all but the last call parsed from the
        # truncated text are the leading calls of the whole text.
        truncated = parser.parse(text[:cut]).tool_calls
        whole = parser.parse(text).tool_calls
        keep = max(len(truncated) - 1, 0)
        assert truncated[:keep] == whole[:keep]

    prop()
