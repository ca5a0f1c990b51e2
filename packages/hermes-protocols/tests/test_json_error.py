"""json_error says where and why a text is not JSON, in one clause."""

from __future__ import annotations

import json

import pytest
from hermes_protocols import json_error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "b', "Unterminated string starting at column 7"),
        ("{", "Expecting property name enclosed in double quotes at column 2"),
        ('{\n"a": }', "Expecting value at line 2 column 6"),
    ],
)
def test_where_and_why(text: str, expected: str) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text)
    assert json_error(info.value) == expected
