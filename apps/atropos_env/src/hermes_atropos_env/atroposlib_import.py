"""atroposlib, imported quietly: it imports transformers, which announces at import time that
PyTorch is missing. The adapter uses transformers for nothing that needs PyTorch, so that
notice is noise to a user; every other record of the ``transformers`` logger passes."""

from __future__ import annotations

from hermes_rollouts import without_torch_notice

with without_torch_notice():
    from atroposlib.envs.base import BaseEnv, BaseEnvConfig, ScoredDataGroup  # type: ignore[import-untyped]
    from atroposlib.envs.server_handling.server_manager import APIServerConfig  # type: ignore[import-untyped]

__all__ = ["APIServerConfig", "BaseEnv", "BaseEnvConfig", "ScoredDataGroup"]
