"""Hypothesis strategies for hermes value types, for the test suites of every package.

Needs the `hypothesis` dev dependency; nothing at run time imports this module.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from hermes_protocols import Message, ToolCall

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=5)
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
texts = st.text()
tool_calls = st.builds(
    ToolCall,
    id=identifiers,
    name=identifiers,
    arguments=json_objects.map(lambda o: json.dumps(o, ensure_ascii=False)),
)
system_messages = st.builds(Message.system, texts)
user_messages = st.builds(Message.user, texts)
assistant_messages = st.builds(
    Message.assistant,
    st.none() | texts,
    st.lists(tool_calls, max_size=3).map(tuple),
    st.none() | texts,
)
tool_messages = st.builds(Message.tool, texts, identifiers, st.none() | identifiers)
messages = st.one_of(system_messages, user_messages, assistant_messages, tool_messages)
