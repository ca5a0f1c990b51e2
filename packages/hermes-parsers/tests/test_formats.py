"""Example tests per format, from the formats' documented wire strings."""

from __future__ import annotations

from typing import Any

import pytest
from hermes_parsers import RenderError, UnknownParserError, get_parser, list_parsers
from hermes_protocols.parsing import (
    ParsedToolCall,
    ToolArgumentsDelta,
    ToolCallFinished,
    ToolCallParser,
    ToolCallStarted,
)

WEATHER = {"city": "Paris", "days": 3}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]

WIRE: dict[str, str] = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    "\n</tool_call>",
    "longcat": '<longcat_tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
    '"days": 3}}\n</longcat_tool_call>',
    "mistral": '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}',
    "mistral_pre_v11": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", '
    '"days": 3}, "id": "abc123XYZ"}]',
    "llama3_json": '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}',
    "llama4_json": '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}',
    "pythonic": '[get_weather(city="Paris", days=3)]',
    "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris", "days": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_v32": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
    "<|tool_calls_section_end|>",
    "glm45": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
    "glm47": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "gpt_oss": "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    '{"city": "Paris", "days": 3}<|call|>',
}


def test_registry_lists_every_format_and_alias() -> None:
    names = list_parsers()
    for name in [*WIRE, "qwen", "qwen2_5", "qwen3"]:
        assert name in names
    for name in names:
        assert isinstance(get_parser(name), ToolCallParser)


def test_unknown_parser_lists_valid_names() -> None:
    with pytest.raises(UnknownParserError) as info:
        get_parser("nope")
    assert "hermes" in str(info.value)
    assert "kimi_k2" in str(info.value)


@pytest.mark.parametrize("name", sorted(WIRE))
def test_documented_wire_string(name: str) -> None:
    parser = get_parser(name)
    turn = parser.parse(WIRE[name], tools=TOOLS)
    assert turn.errors == ()
    assert turn.content is None
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("get_weather", WEATHER)]
    rendered = parser.render(tool_calls=turn.tool_calls)
    assert parser.parse(rendered, tools=TOOLS).tool_calls == turn.tool_calls


@pytest.mark.parametrize("name", ["hermes", "longcat", "deepseek_v31", "kimi_k2", "mistral"])
def test_raw_arguments_are_the_exact_emitted_text(name: str) -> None:
    text = WIRE[name].replace('{"city": "Paris", "days": 3}', '{ "city":"Paris" ,"days":3 }')
    (call,) = get_parser(name).parse(text).tool_calls
    assert call.raw_arguments.strip() == '{ "city":"Paris" ,"days":3 }'
    assert call.arguments == WEATHER


def test_hermes_reasoning_content_and_calls() -> None:
    text = (
        "<think>\nI should call <tool_call>maybe</tool_call>\n</think>\n\nLet me check.\n"
        '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {"x": "</tool_call>"}}\n</tool_call>'
    )
    turn = get_parser("qwen3").parse(text)
    assert turn.reasoning == "I should call <tool_call>maybe</tool_call>"
    assert turn.content == "Let me check."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("a", {}),
        ("b", {"x": "</tool_call>"}),
    ]
    assert get_parser("qwen3").render(
        content=turn.content, tool_calls=turn.tool_calls, reasoning=turn.reasoning
    ) == text.replace("maybe</tool_call>\n</think>", "maybe</tool_call>\n</think>")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>', "invalid_json"),
        ('<tool_call>\n{"arguments": {}}\n</tool_call>', "missing_name"),
        ('<tool_call>\n{"name": "f", "arguments": "{}"}\n</tool_call>', "not_an_object"),
        ("<tool_call>\n[1, 2]\n</tool_call>", "not_an_object"),
        ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}', "unclosed_call"),
    ],
)
def test_hermes_malformed_calls_are_reported(text: str, kind: str) -> None:
    turn = get_parser("hermes").parse("before " + text)
    assert turn.tool_calls == ()
    (error,) = turn.errors
    assert error.kind == kind
    assert error.call_index == 0
    assert error.start == len("before ")
    assert turn.content == "before "


def test_an_unclosed_call_does_not_guess_why() -> None:
    """The parser sees text, not how the turn ended: the same unclosed call follows a sampled
    end token as often as a token limit, so its message says neither (the record's turn
    timings say which)."""
    (error,) = get_parser("hermes").parse('<tool_call>\n{"name": "f"}').errors
    assert error.kind == "unclosed_call"
    assert "truncat" not in error.message
    assert "before the turn ended" in error.message


def test_hermes_unbalanced_quote_closes_at_the_tag_and_keeps_reading() -> None:
    text = '<tool_call>{"name": "f", "arguments": {"a": "x}}</tool_call>\nafter'
    turn = get_parser("hermes").parse(text)
    assert [e.kind for e in turn.errors] == ["invalid_json"]
    assert turn.content == "\nafter"


def test_bare_json_without_tags_is_content_for_hermes_and_a_call_for_llama3_json() -> None:
    text = '{"name": "f", "arguments": {"a": 1}}'
    assert get_parser("hermes").parse(text).content == text
    (call,) = get_parser("llama3_json").parse(text).tool_calls
    assert (call.name, call.arguments) == ("f", {"a": 1})


def test_streaming_events_for_a_call() -> None:
    stream = get_parser("hermes", stream_batch=1).stream()
    events = []
    assert stream.feed(WIRE["hermes"][:5]) == []
    for ch in WIRE["hermes"][5:]:
        events += stream.feed(ch)
    events += stream.finish()[0]
    kinds = [type(e) for e in events]
    assert kinds == [ToolCallStarted, ToolArgumentsDelta, ToolCallFinished]
    started = events[0]
    assert isinstance(started, ToolCallStarted)
    assert started.name == "get_weather"


def test_mistral_ids() -> None:
    parser = get_parser("mistral")
    (call,) = parser.parse(WIRE["mistral"]).tool_calls
    assert call.id is not None
    assert len(call.id) == 9
    assert call.id.isalnum()
    assert parser.parse(WIRE["mistral"]).tool_calls[0].id == call.id
    (legacy,) = parser.parse(WIRE["mistral_pre_v11"]).tool_calls
    assert legacy.id == "abc123XYZ"
    with pytest.raises(RenderError):
        get_parser("mistral_pre_v11").render(
            tool_calls=[ParsedToolCall("f", {}, "{}", "too-long-id")]
        )


def test_mistral_two_calls_and_magistral_reasoning() -> None:
    text = '[THINK]plan[/THINK]ok[TOOL_CALLS]a[ARGS]{"s": "[TOOL_CALLS]"}[TOOL_CALLS]b[ARGS]{}'
    turn = get_parser("mistral").parse(text)
    assert turn.reasoning == "plan"
    assert turn.content == "ok"
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("a", {"s": "[TOOL_CALLS]"}),
        ("b", {}),
    ]


def test_kimi_keeps_ids_and_reads_dotted_names() -> None:
    text = WIRE["kimi_k2"].replace("functions.get_weather:0", "functions.web.search:7")
    (call,) = get_parser("kimi_k2").parse(text).tool_calls
    assert (call.name, call.id) == ("web.search", "functions.web.search:7")


def test_qwen3_coder_types_by_schema() -> None:
    text = (
        "<tool_call>\n<function=f>\n<parameter=zip>\n02134\n</parameter>\n"
        "<parameter=n>\n7\n</parameter>\n<parameter=ok>\nTrue\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    schema = {
        "name": "f",
        "parameters": {
            "properties": {
                "zip": {"type": "string"},
                "n": {"type": "integer"},
                "ok": {"type": "boolean"},
            }
        },
    }
    (call,) = get_parser("qwen3_coder").parse(text, tools=[schema]).tool_calls
    assert call.arguments == {"zip": "02134", "n": 7, "ok": True}
    untyped = get_parser("qwen3_coder").parse(text).tool_calls[0].arguments
    assert untyped == {"zip": "02134", "n": 7, "ok": True}
    bad = text.replace("\n7\n", "\nseven\n")
    turn = get_parser("qwen3_coder").parse(bad, tools=[schema])
    assert turn.tool_calls == ()
    assert turn.errors[0].kind == "invalid_json"
    assert "'n'" in turn.errors[0].message


def test_dsml_string_flag_types_without_schema() -> None:
    (call,) = get_parser("deepseek_v32").parse(WIRE["deepseek_v32"]).tool_calls
    assert call.arguments == WEATHER
    text = WIRE["deepseek_v32"].replace(
        'name="city" string="true">Paris', 'name="city" string="true">12'
    )
    assert get_parser("deepseek_v32").parse(text).tool_calls[0].arguments == {
        "city": "12",
        "days": 3,
    }


def test_gpt_oss_channels() -> None:
    text = (
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" + WIRE["gpt_oss"]
    )
    turn = get_parser("gpt_oss").parse(text)
    assert turn.reasoning == "Need the weather."
    assert turn.tool_calls[0].arguments == WEATHER
    final = get_parser("gpt_oss").parse("<|channel|>final<|message|>It is sunny.<|return|>")
    assert final.content == "It is sunny."


def test_pythonic_values_and_errors() -> None:
    text = "[f(a='x', b=[1, -2.5], c={'k': None}, d=true), g()]"
    calls = get_parser("pythonic").parse(text).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("f", {"a": "x", "b": [1, -2.5], "c": {"k": None}, "d": True}),
        ("g", {}),
    ]
    assert calls[0].raw_arguments == "a='x', b=[1, -2.5], c={'k': None}, d=true"
    broken = get_parser("pythonic").parse("[f(a=1, b=os.system('x'))]")
    assert broken.tool_calls == ()
    assert broken.errors[0].kind == "malformed_call"
    with pytest.raises(RenderError):
        get_parser("pythonic").render(tool_calls=[ParsedToolCall("f", {"not ok": 1}, "")])


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("hermes", {"content": "see <tool_call> here"}),
        ("hermes", {"reasoning": "a </think> b"}),
        ("qwen3_coder", {"tool_calls": [ParsedToolCall("f", {"v": "x</parameter>"}, "")]}),
        ("glm47", {"tool_calls": [ParsedToolCall("f", {"v": "x</arg_value>"}, "")]}),
        ("deepseek_v32", {"tool_calls": [ParsedToolCall('f"', {}, "")]}),
        ("llama3_json", {"content": "hi", "tool_calls": [ParsedToolCall("f", {}, "")]}),
        ("gpt_oss", {"content": "a<|end|>b"}),
        ("kimi_k2", {"tool_calls": [ParsedToolCall("f", {}, "", "functions.g:0")]}),
    ],
)
def test_render_refuses_what_the_format_cannot_carry(name: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(RenderError):
        get_parser(name).render(**kwargs)


def test_reasoning_open_prompt() -> None:
    parser = get_parser("deepseek_v31", reasoning_open=True)
    turn = parser.parse("thinking...</think>The answer.")
    assert (turn.reasoning, turn.content) == ("thinking...", "The answer.")
    assert parser.render(content="The answer.", reasoning="thinking...") == (
        "thinking...</think>The answer."
    )


def test_streaming_emits_content_before_the_end() -> None:
    stream = get_parser("hermes", stream_batch=1).stream()
    assert stream.feed("Hello wor") != []
    batched = get_parser("hermes", stream_batch=16).stream()
    assert batched.feed("Hello wor") == []
    assert batched.feed("ld, and more!") != []


DEEP = "[" * 50_000


@pytest.mark.parametrize("name", list_parsers())
def test_pathological_nesting_is_an_error_not_an_exception(name: str) -> None:
    parser = get_parser(name)
    for text in [
        f'<tool_call>{{"name": "f", "arguments": {{"a": {DEEP}}}}}</tool_call>',
        f'[TOOL_CALLS]f[ARGS]{{"a": {DEEP}',
        f'{{"name": "f", "parameters": {{"a": {DEEP}',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        f'<|tool_call_argument_begin|>{{"a": {DEEP}<|tool_call_end|>',
        f"<tool_call>\n<function=f>\n<parameter=a>\n{DEEP}\n</parameter>\n</function>\n</tool_call>",
        f"[f(a={DEEP})]",
    ]:
        turn = parser.parse(text)
        assert turn.tool_calls == () or all(c.arguments is not None for c in turn.tool_calls)
