"""atroposlib, imported quietly: it imports transformers, which announces at import time that
PyTorch is missing. The adapter uses transformers for nothing that needs PyTorch, so that
notice is noise to a user; every other record of the ``transformers`` logger passes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

TORCH_NOTICE = "PyTorch was not found"


def _not_the_torch_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(TORCH_NOTICE)


@contextlib.contextmanager
def without_torch_notice() -> Iterator[None]:
    """Drop transformers' PyTorch notice while the block runs (a filter on its logger, removed
    on exit)."""
    logger = logging.getLogger("transformers")
    logger.addFilter(_not_the_torch_notice)
    try:
        yield
    finally:
        logger.removeFilter(_not_the_torch_notice)


with without_torch_notice():
    from atroposlib.envs.base import BaseEnv, BaseEnvConfig, ScoredDataGroup  # type: ignore[import-untyped]
    from atroposlib.envs.server_handling.server_manager import APIServerConfig  # type: ignore[import-untyped]

__all__ = ["APIServerConfig", "BaseEnv", "BaseEnvConfig", "ScoredDataGroup"]
