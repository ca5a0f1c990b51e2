"""json_problem names the first value that is not plain JSON, with its path."""

from __future__ import annotations

import json
import math

from hermes_protocols import json_problem
from hypothesis import given
from hypothesis import strategies as st

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_plain_json_has_no_problem(value: object) -> None:
    assert json_problem(value) is None
    json.dumps(value, allow_nan=False)  # and it really encodes


def test_the_first_offending_value_is_named_with_its_path() -> None:
    metadata = {"workspace": {"files": {"a.txt": "ok", "tests/x.py": b"\x00"}}}
    assert json_problem(metadata, "metadata") == "metadata.workspace.files['tests/x.py']: bytes"
    assert json_problem([1, (2, {3})]) == "$[1][1]: set"
    assert json_problem({"m": math.nan}) == "$.m: nan (not a finite number)"
    assert json_problem({1: "x"}) == "$: key 1 (int) is not a str"
