"""Calls whose parameters are written one by one as text (XML-like formats)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_protocols.parsing import ParsedToolCall

from hermes_parsers._schemas import parameter_type, typed_value
from hermes_parsers._spec import BodyError, Decoded, Schemas


def typed_call(
    name: str,
    pairs: Sequence[tuple[str, str, bool | None]],
    raw: str,
    schemas: Schemas,
) -> Decoded:
    """Build a call from ``(key, text, is_string)`` pairs.

    ``is_string`` is the format's own type flag when it has one (DSML ``string="true"``);
    otherwise the tool schema decides, and without a schema JSON-looking text is decoded.
    """
    arguments: dict[str, Any] = {}
    for key, text, is_string in pairs:
        try:
            if is_string is True:
                arguments[key] = text
            elif is_string is False:
                arguments[key] = json.loads(text)
            else:
                arguments[key] = typed_value(text, parameter_type(schemas, name, key))
        except (ValueError, RecursionError) as exc:
            kind = parameter_type(schemas, name, key) or "JSON"
            return BodyError(
                "invalid_json",
                f"parameter {key!r} of {name!r}: value {text[:60]!r} is not a valid {kind} ({exc})",
                name,
            )
    return ParsedToolCall(name=name, arguments=arguments, raw_arguments=raw)


def template_text(value: Any) -> str:
    """A parameter value as Jinja templates print it: strings raw, mappings and lists as JSON,
    other scalars with Python ``str`` (``True``, ``None``, ``1.5``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def json_text(value: Any) -> str:
    """Strings raw, everything else as JSON (GLM and DSML templates)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
