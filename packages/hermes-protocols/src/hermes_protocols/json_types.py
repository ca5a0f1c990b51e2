"""JSON value type aliases (kept as ``Any`` so cattrs and mypy both pass them through)."""

from __future__ import annotations

from typing import Any, TypeAlias

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]
