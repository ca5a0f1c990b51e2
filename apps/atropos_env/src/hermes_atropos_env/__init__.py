"""hermes-atropos-env: run hermes-envs environments as Atropos (atroposlib 0.4.0) environments."""

from hermes_atropos_env.config import (
    HermesAtroposEnvConfig,
    InferenceConfig,
    atropos_server_configs,
)
from hermes_atropos_env.display import format_rollout
from hermes_atropos_env.groups import (
    Exclusion,
    GroupOutcome,
    GroupPolicy,
    build_group,
    truncate_trace,
)
from hermes_atropos_env.metrics import RolloutMetrics
from hermes_atropos_env.source import RolloutSource, RolloutSourceFactory
from hermes_atropos_env.validation import KnownNames, config_problems, validate_config

__all__ = [
    "Exclusion",
    "GroupOutcome",
    "GroupPolicy",
    "HermesAtroposEnvConfig",
    "InferenceConfig",
    "KnownNames",
    "RolloutMetrics",
    "RolloutSource",
    "RolloutSourceFactory",
    "atropos_server_configs",
    "build_group",
    "config_problems",
    "format_rollout",
    "truncate_trace",
    "validate_config",
]
