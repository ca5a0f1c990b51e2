"""Read tool schemas (OpenAI tool dicts) and type parameter text by them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_parsers._spec import Schemas

_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def schemas_from_tools(tools: Sequence[Mapping[str, Any]] | None) -> Schemas:
    """``{name: parameters schema}`` from OpenAI tool dicts (``{"type": "function", ...}``) or
    bare function dicts; malformed entries are ignored (parsing must never raise)."""
    out: dict[str, Mapping[str, Any]] = {}
    items: Sequence[object] = tools or ()
    for tool in items:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping):
            continue
        name, params = fn.get("name"), fn.get("parameters")
        if isinstance(name, str):
            out[name] = params if isinstance(params, Mapping) else {}
    return out


def parameter_type(schemas: Schemas, tool: str, parameter: str) -> str | None:
    """The JSON-schema type declared for one parameter, or None when unknown."""
    props = schemas.get(tool, {}).get("properties")
    if not isinstance(props, Mapping):
        return None
    spec = props.get(parameter)
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str) and k != "null"]
        return kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None


_PY_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}


def typed_value(text: str, kind: str | None) -> Any:
    """Decode parameter text as the schema type says; raise ``ValueError`` when it does not fit.

    ``string`` keeps the text as is (a string that looks like a number stays a string);
    without a type, JSON is decoded when it parses (Python ``True``/``False``/``None`` too)
    and anything else is a string.
    """
    if kind == "string":
        return text
    stripped = text.strip()
    if kind is None:
        try:
            return json.loads(stripped)
        except ValueError:
            return _PY_CONSTANTS.get(stripped, text) if stripped in _PY_CONSTANTS else text
    if kind == "integer":
        if _INT.fullmatch(stripped):
            return int(stripped)
        raise ValueError(f"expected an integer, got {text!r}")
    if kind == "boolean":
        lowered = {"true": True, "false": False}.get(stripped.lower())
        if lowered is None:
            raise ValueError(f"expected a boolean, got {text!r}")
        return lowered
    if kind == "null":
        if stripped in ("null", "None"):
            return None
        raise ValueError(f"expected null, got {text!r}")
    if stripped in _PY_CONSTANTS and kind in ("object", "array", "number"):
        raise ValueError(f"expected {kind}, got {text!r}")
    value = json.loads(stripped)
    expected: dict[str, type | tuple[type, ...]] = {
        "number": (int, float),
        "object": dict,
        "array": list,
    }
    want = expected.get(kind)
    if want is not None and (isinstance(value, bool) or not isinstance(value, want)):
        raise ValueError(f"expected {kind}, got {text!r}")
    return value
