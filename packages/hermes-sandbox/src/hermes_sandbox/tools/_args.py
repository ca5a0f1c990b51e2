"""Argument helpers shared by the tools: typed reads with clear ``ToolArgumentError``s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermes_protocols import ToolArgumentError


def string_arg(args: Mapping[str, Any], name: str, *, default: str | None = None) -> str:
    value = args.get(name, default)
    if value is None:
        raise ToolArgumentError(f"missing required argument {name!r}")
    if not isinstance(value, str):
        raise ToolArgumentError(f"argument {name!r} must be a string, got {type(value).__name__}")
    return value


def optional_string_arg(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    return string_arg(args, name)


def int_arg(
    args: Mapping[str, Any], name: str, *, default: int, minimum: int, maximum: int | None = None
) -> int:
    value = args.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ToolArgumentError(f"argument {name!r} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise ToolArgumentError(f"argument {name!r} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ToolArgumentError(f"argument {name!r} must be <= {maximum}, got {number}")
    return number


def bool_arg(args: Mapping[str, Any], name: str, *, default: bool) -> bool:
    value = args.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolArgumentError(f"argument {name!r} must be a boolean, got {value!r}")
    return value


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``limit`` characters, with a notice."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    omitted = len(text) - 2 * half
    notice = f"\n\n[... output truncated: {omitted} characters omitted of {len(text)} ...]\n\n"
    return text[:half] + notice + text[len(text) - half :], True
