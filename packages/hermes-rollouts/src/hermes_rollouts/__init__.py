"""hermes-rollouts: the assembly layer. One typed :class:`RolloutSpec` -> a started
:class:`RolloutSession` (sandbox pool + model + tools + agent loop + rollout runner).

It imports the five packages; none of them imports it (import-linter contract). It is the
apps' only door to them: the apps map their options onto the spec (whose section types,
:class:`ModelSpec` and :class:`SandboxSpec`, are re-exported here with their choices) and the
session's results onto their output formats.
"""

from hermes_envs.prefill import demonstration_path
from hermes_loop import SERVER_TYPES, ModelHandle, ModelSpec, ServerType
from hermes_loop.hf_tokenizer import without_torch_notice
from hermes_sandbox.factory import (
    BACKEND_KINDS,
    DEFAULT_NOMAD_JOB_PREFIX,
    BackendKind,
    SandboxSpec,
)

from hermes_rollouts.adapter_file import AdapterFile, file_sha256
from hermes_rollouts.atropos_api import pull_batch, register_trainer
from hermes_rollouts.boundary import root_error
from hermes_rollouts.chat_messages import message_dict, tools_chat_template
from hermes_rollouts.check_report import CheckResult, EnvironmentCheckReport, Status
from hermes_rollouts.command_line import (
    CommandParser,
    ListEnvironments,
    json_object_option,
    progress_bar,
)
from hermes_rollouts.credentials import Credentials
from hermes_rollouts.dataset import DatasetEnvironment, LoadedDataset, load_dataset
from hermes_rollouts.driven import (
    STEP_TIMEOUT_S,
    Action,
    DrivenBackend,
    DrivenEpisode,
    DrivenSession,
    InfrastructureFailure,
    judged_reward,
    open_driven_session,
)
from hermes_rollouts.env_check import check_environment
from hermes_rollouts.environment import (
    EMBEDDED_TOOLSETS,
    build_environment,
    default_prefill,
    default_toolsets,
)
from hermes_rollouts.episodes import (
    BlockingEpisodes,
    Episode,
    EpisodeHost,
    blocking_episodes,
    open_episode_host,
)
from hermes_rollouts.models import (
    TokenizerDir,
    hf_tokenizer_dir,
    read_gguf_file,
    resolve_model_path,
)
from hermes_rollouts.option_defaults import (
    COMMAND_TIMEOUT,
    CONTEXT_TOKENS,
    ENVIRONMENT,
    MAX_TOKENS,
    MAX_TURNS,
    OPTION_DEFAULTS,
    PARSER,
    ROLLOUT_TIMEOUT,
    SANDBOX,
    SANDBOX_SLOTS,
    SEED,
    TEMPERATURE,
    OptionDefault,
)
from hermes_rollouts.plugin_loading import ENTRY_POINT_GROUP, PluginError
from hermes_rollouts.plugins import (
    EnvironmentInfo,
    EnvironmentPlugin,
    available_environments,
    environment_names,
    environments_text,
    reference_slug,
    resolve_environment,
)
from hermes_rollouts.preflight import PreflightError
from hermes_rollouts.records import (
    conversations,
    model_view,
    prefill_messages,
    system_prompt,
    tool_stats,
)
from hermes_rollouts.session import (
    ModelOpener,
    RolloutSession,
    derive_seed,
    get_parser,
    open_session,
)
from hermes_rollouts.signal_policy import (
    DUPLICATE_WINDOW_S,
    STOP_SIGNALS,
    Interruption,
    SignalCounter,
    cancel_when_set,
    interrupted_exit_code,
    signals_watched,
)
from hermes_rollouts.single_rollout import (
    RolloutOutcome,
    item_from_json,
    item_json,
    run_single_rollout,
)
from hermes_rollouts.spec import (
    AgentBudgets,
    EnvironmentSpec,
    PoolSpec,
    RolloutSpec,
    SamplingSpec,
    ToolsetSpec,
)
from hermes_rollouts.trajectory_record import (
    RecordError,
    encode_record,
    rollout_id,
    rollout_record,
)
from hermes_rollouts.validation import (
    TOOLSET_NAMES,
    SpecCheck,
    check_spec,
    parser_names,
    spec_problems,
    validate,
)

__all__ = [
    "BACKEND_KINDS",
    "COMMAND_TIMEOUT",
    "CONTEXT_TOKENS",
    "DEFAULT_NOMAD_JOB_PREFIX",
    "DUPLICATE_WINDOW_S",
    "EMBEDDED_TOOLSETS",
    "ENTRY_POINT_GROUP",
    "ENVIRONMENT",
    "MAX_TOKENS",
    "MAX_TURNS",
    "OPTION_DEFAULTS",
    "PARSER",
    "ROLLOUT_TIMEOUT",
    "SANDBOX",
    "SANDBOX_SLOTS",
    "SEED",
    "SERVER_TYPES",
    "STEP_TIMEOUT_S",
    "STOP_SIGNALS",
    "TEMPERATURE",
    "TOOLSET_NAMES",
    "Action",
    "AdapterFile",
    "AgentBudgets",
    "BackendKind",
    "BlockingEpisodes",
    "CheckResult",
    "CommandParser",
    "Credentials",
    "DatasetEnvironment",
    "DrivenBackend",
    "DrivenEpisode",
    "DrivenSession",
    "EnvironmentCheckReport",
    "EnvironmentInfo",
    "EnvironmentPlugin",
    "EnvironmentSpec",
    "Episode",
    "EpisodeHost",
    "InfrastructureFailure",
    "Interruption",
    "ListEnvironments",
    "LoadedDataset",
    "ModelHandle",
    "ModelOpener",
    "ModelSpec",
    "OptionDefault",
    "PluginError",
    "PoolSpec",
    "PreflightError",
    "RecordError",
    "RolloutOutcome",
    "RolloutSession",
    "RolloutSpec",
    "SamplingSpec",
    "SandboxSpec",
    "ServerType",
    "SignalCounter",
    "SpecCheck",
    "Status",
    "TokenizerDir",
    "ToolsetSpec",
    "available_environments",
    "blocking_episodes",
    "build_environment",
    "cancel_when_set",
    "check_environment",
    "check_spec",
    "conversations",
    "default_prefill",
    "default_toolsets",
    "demonstration_path",
    "derive_seed",
    "encode_record",
    "environment_names",
    "environments_text",
    "file_sha256",
    "get_parser",
    "hf_tokenizer_dir",
    "interrupted_exit_code",
    "item_from_json",
    "item_json",
    "json_object_option",
    "judged_reward",
    "load_dataset",
    "message_dict",
    "model_view",
    "open_driven_session",
    "open_episode_host",
    "open_session",
    "parser_names",
    "prefill_messages",
    "progress_bar",
    "pull_batch",
    "read_gguf_file",
    "reference_slug",
    "register_trainer",
    "resolve_environment",
    "resolve_model_path",
    "rollout_id",
    "rollout_record",
    "root_error",
    "run_single_rollout",
    "signals_watched",
    "spec_problems",
    "system_prompt",
    "tool_stats",
    "tools_chat_template",
    "validate",
    "without_torch_notice",
]
