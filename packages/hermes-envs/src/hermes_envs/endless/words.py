"""Deterministic random words, names and numbers for generated tasks."""

from __future__ import annotations

import random

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")


def word(rng: random.Random, syllables: int = 2) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))


def words(rng: random.Random, count: int, syllables: int = 2) -> list[str]:
    """``count`` distinct words."""
    seen: dict[str, None] = {}
    while len(seen) < count:
        seen.setdefault(word(rng, syllables), None)
    return list(seen)


def lines(values: list[str]) -> bytes:
    return ("\n".join(values) + "\n").encode()


def size(level: int, base: int) -> int:
    """Scale a data size with difficulty (1, 2, 3)."""
    return base * (1 + 2 * (level - 1))
