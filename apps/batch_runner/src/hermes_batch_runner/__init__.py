"""hermes-batch-runner: resumable, exactly-once, concurrent trajectory generation.

The production wiring (``hermes_batch_runner.wiring.real_components``) is imported lazily by
the CLI, so importing this package does not load the model or sandbox packages.
"""

from hermes_batch_runner.app import RunResult, resume_command, run_batch, write_outputs
from hermes_batch_runner.cli import build_parser, main
from hermes_batch_runner.components import Components, Wiring
from hermes_batch_runner.config import (
    RUNTIME_KEYS,
    RunConfig,
    config_from_options,
    config_to_json,
    differing_keys,
    load_config_file,
    resolve_for_resume,
)
from hermes_batch_runner.engine import (
    Outcome,
    PlannedRollout,
    RolloutSink,
    execute,
    plan_rollouts,
)
from hermes_batch_runner.errors import (
    BatchRunnerError,
    CorruptLogError,
    OutputDirError,
    ResumeMismatch,
)
from hermes_batch_runner.filters import WriteFilters
from hermes_batch_runner.jsonl_log import (
    JsonlLog,
    Recovery,
    RunLock,
    iter_records,
    read_records,
    recover_log,
)
from hermes_batch_runner.run_dir import default_run_dir, prepare_run_dir
from hermes_batch_runner.summary import SessionStats, SummaryBuilder, build_summary

__all__ = [
    "RUNTIME_KEYS",
    "BatchRunnerError",
    "Components",
    "CorruptLogError",
    "JsonlLog",
    "Outcome",
    "OutputDirError",
    "PlannedRollout",
    "Recovery",
    "ResumeMismatch",
    "RolloutSink",
    "RunConfig",
    "RunLock",
    "RunResult",
    "SessionStats",
    "SummaryBuilder",
    "Wiring",
    "WriteFilters",
    "build_parser",
    "build_summary",
    "config_from_options",
    "config_to_json",
    "default_run_dir",
    "differing_keys",
    "execute",
    "iter_records",
    "load_config_file",
    "main",
    "plan_rollouts",
    "prepare_run_dir",
    "read_records",
    "recover_log",
    "resolve_for_resume",
    "resume_command",
    "run_batch",
    "write_outputs",
]
