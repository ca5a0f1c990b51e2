"""hermes-atropos-env: run hermes-envs environments as Atropos (atroposlib 0.4.0) environments.

The mapping of the adapter's options onto the assembly (:mod:`hermes_rollouts`) lives in
``hermes_atropos_env.wiring`` (``rollout_spec``, ``HermesWiring``) and is imported by the CLI
on demand, so importing
this package (or running ``python -m hermes_atropos_env.trainer``) loads no model code.
"""

from hermes_atropos_env.config import (
    HermesAtroposEnvConfig,
    InferenceConfig,
    atropos_server_configs,
)
from hermes_atropos_env.display import format_rollout
from hermes_atropos_env.env import HermesAtroposEnv
from hermes_atropos_env.groups import (
    Exclusion,
    GroupOutcome,
    GroupPolicy,
    build_group,
    truncate_trace,
)
from hermes_atropos_env.metrics import RolloutMetrics
from hermes_atropos_env.retokenize import ChatTemplateRetokenizer
from hermes_atropos_env.source import RolloutSource, RolloutSourceFactory
from hermes_atropos_env.trainer import batch_problems, run_trainer
from hermes_atropos_env.validation import config_problems, validate_config

__all__ = [
    "ChatTemplateRetokenizer",
    "Exclusion",
    "GroupOutcome",
    "GroupPolicy",
    "HermesAtroposEnv",
    "HermesAtroposEnvConfig",
    "InferenceConfig",
    "RolloutMetrics",
    "RolloutSource",
    "RolloutSourceFactory",
    "atropos_server_configs",
    "batch_problems",
    "build_group",
    "config_problems",
    "format_rollout",
    "run_trainer",
    "truncate_trace",
    "validate_config",
]
