"""Tokenizer work from async code: inline when small, in a worker thread when large.

A thread hop costs tens of microseconds, more than encoding a short bridge; a long prompt or a
whole-conversation drift check can block the event loop for milliseconds. The cut-off is a size
estimate in characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

_A = TypeVar("_A")
_R = TypeVar("_R")

#: work on texts longer than this (in characters, or ids x 4) runs in a worker thread
OFFLOAD_CHARS = 16_384


async def run_sized(function: Callable[[_A], _R], argument: _A, size: int) -> _R:
    """``function(argument)``, in a worker thread when ``size >= OFFLOAD_CHARS``."""
    if size < OFFLOAD_CHARS:
        return function(argument)
    return await anyio.to_thread.run_sync(function, argument)
