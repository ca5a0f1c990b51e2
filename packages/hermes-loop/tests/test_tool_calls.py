"""Schema validation (fast acceptor agrees with jsonschema) and the bridge's tool handling."""

from __future__ import annotations

from typing import Any

import jsonschema
from hermes_loop import JinjaChatTemplate, SchemaCache, TemplateBridge
from hermes_protocols import Message, ToolSchema
from hypothesis import example, given, settings
from hypothesis import strategies as st

types = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
names = st.sampled_from(["a", "b", "c", "d"])
prop_schema = st.one_of(
    st.builds(lambda t: {"type": t}, types),
    st.builds(lambda t: {"type": t, "description": "x"}, types),
    st.just({}),
    st.just({"type": "string", "enum": ["x"]}),  # outside the fast subset
    st.just({"type": ["string", "null"]}),  # outside the fast subset
)
schemas = st.builds(
    lambda props, required, extra: {
        "type": "object",
        "properties": props,
        "required": sorted(set(required)),
        **({} if extra is None else {"additionalProperties": extra}),
    },
    st.dictionaries(names, prop_schema, max_size=4),
    st.lists(names, max_size=3),
    st.none() | st.booleans(),
)
values = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=3)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers())
)


@st.composite
def schema_and_arguments(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Arguments mostly use the schema's own property names, so type checks get exercised."""
    schema = draw(schemas)
    keys = [*schema["properties"], "e"]
    tricky = st.sampled_from(
        [True, False, 0, 1, -3, 1.0, 1.5, "", "x", None, [], [1], {}, {"k": 1}]
    )
    args = draw(st.dictionaries(st.sampled_from(keys), tricky | values, max_size=len(keys)))
    return schema, args


@settings(max_examples=400)
@given(pair=schema_and_arguments())
@example(pair=({"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": True}))
@example(pair=({"type": "object", "properties": {"a": {"type": "number"}}}, {"a": False}))
@example(pair=({"type": "object", "properties": {}, "additionalProperties": False}, {"a": 1}))
def test_schema_cache_agrees_with_jsonschema(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, args = pair
    tool = ToolSchema(name="t", description="", parameters=schema)
    cache = SchemaCache()
    expected_valid = jsonschema.validators.validator_for(schema)(schema).is_valid(args)
    assert (cache.first_error(tool, args) is None) == expected_valid
    assert (cache.first_error(tool, args) is None) == expected_valid  # cached path too


# a template whose tool messages render differently when tools are given
TOOLS_CHANGE_BODY = (
    "{% for m in messages %}<{{ m.role }}>"
    "{% if m.role == 'tool' and tools %}[{{ tools | length }} tools] {% endif %}"
    "{{ m.content or '' }}</{{ m.role }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_bridge_renders_tools_when_they_change_the_body() -> None:
    tool = ToolSchema(name="echo", description="d")
    bridge = TemplateBridge(JinjaChatTemplate(TOOLS_CHANGE_BODY), [tool])
    text = bridge.after_turn([Message.tool("ok", "c1")], add_generation_prompt=True)
    assert text == "</assistant><tool>[1 tools] ok</tool><assistant>"


def test_bridge_skips_tools_when_they_only_change_the_header(chatml: str) -> None:
    tool = ToolSchema(name="echo", description="d")
    template = JinjaChatTemplate(chatml)
    fast = TemplateBridge(template, [tool])
    text = fast.after_turn([Message.tool("ok", "c1")], add_generation_prompt=True)
    assert text == (
        "<|im_end|>\n<|im_start|>tool\n<tool_response>\nok\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert fast._tools == ()
