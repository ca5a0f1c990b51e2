"""Our tools as the methods TRL calls: TRL lists an environment class's public methods and
reads each one's JSON schema from its signature, type hints and Google-style docstring
(transformers' ``get_json_schema``), so each method is built from our tool's schema."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Optional

from hermes_protocols import ToolSchema

_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def tool_method(schema: ToolSchema) -> Callable[..., str]:
    """A method ``schema.name(self, **arguments)`` that runs the tool through ``self._call``."""
    properties: dict[str, Any] = dict(schema.parameters.get("properties") or {})
    required = set(schema.parameters.get("required") or ())
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for name, prop in properties.items():
        kind = _TYPES.get(str(prop.get("type")), str)
        hint: Any = kind if name in required else Optional[kind]  # noqa: UP045 (a runtime type)
        default = inspect.Parameter.empty if name in required else None
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint
            )
        )
        annotations[name] = hint
        description = " ".join(str(prop.get("description") or name).split())
        lines.append(f"    {name}: {description}")
    annotations["return"] = str

    def method(self: Any, **arguments: Any) -> str:
        given = {key: value for key, value in arguments.items() if value is not None}
        result: str = self._call(schema.name, given)
        return result

    method.__name__ = method.__qualname__ = schema.name
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    summary = " ".join(schema.description.split()) or schema.name
    method.__doc__ = f"{summary}\n\nArgs:\n" + "\n".join(lines) if lines else summary
    return method
