"""attrs converters with precise types (``converter=tuple`` loses the element type)."""

from __future__ import annotations

from collections.abc import Iterable


def str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)
