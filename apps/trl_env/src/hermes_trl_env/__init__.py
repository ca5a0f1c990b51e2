"""hermes-rl environments for TRL's GRPOTrainer: :func:`environment_factory` wraps any
environment our resolver finds (see docs/trl.md)."""

from hermes_trl_env.dataset import episode_rows
from hermes_trl_env.environment import EpisodeLedger, environment_factory
from hermes_trl_env.tokenizer import with_tool_template

__all__ = ["EpisodeLedger", "environment_factory", "episode_rows", "with_tool_template"]
