"""JSON value type aliases (kept as ``Any`` so cattrs and mypy both pass them through),
:func:`json_problem`, which says where a value stops being plain JSON, and :func:`json_error`,
which says where a text stops being JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeAlias

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]


def json_problem(value: object, path: str = "$") -> str | None:
    """Where ``value`` is not plain JSON, as ``"<path>: <what>"`` (``None``: it is).

    Plain JSON is ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists (tuples write as
    lists) and mappings with ``str`` keys. The path names the first offending value, e.g.
    ``metadata.workspace.files['a.txt']: bytes``."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: {value!r} (not a finite number)"
    if isinstance(value, list | tuple):
        for index, element in enumerate(value):
            found = json_problem(element, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(value, Mapping):
        for key, element in value.items():
            if not isinstance(key, str):
                return f"{path}: key {key!r} ({type(key).__name__}) is not a str"
            found = json_problem(
                element, f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"
            )
            if found is not None:
                return found
        return None
    return f"{path}: {type(value).__name__}"


def json_error(exc: json.JSONDecodeError) -> str:
    """Where and why a text is not JSON, as one clause: ``Unterminated string starting at
    column 24`` (the line only when the text has several)."""
    where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
    return f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} at {where}"
