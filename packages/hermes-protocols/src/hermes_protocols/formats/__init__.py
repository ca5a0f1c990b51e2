"""The files hermes-rl writes and reads, typed once for every writer and reader: the
trajectory record, the Atropos group and the run directory, with their format versions."""

from hermes_protocols.formats.atropos_group import (
    ATROPOS_MASKED,
    GROUP_FORMAT,
    MASKED_LOGPROB,
    AtroposGroup,
    atropos_logprobs,
    atropos_mask,
)
from hermes_protocols.formats.run_directory import RUN_FILE, STATUS_LOGS, RunDirectory
from hermes_protocols.formats.token_sequence import TokenSequence
from hermes_protocols.formats.training_run import (
    EVAL_PHASE,
    TRAIN_PHASE,
    TRAINING_ROLLOUTS_DIR,
    TrainingTag,
    training_rollouts,
)
from hermes_protocols.formats.trajectory_record import (
    FORMAT_KEY,
    TRAJECTORY_FORMAT,
    check_trajectory_version,
    token_fields,
    trajectory_sequence,
)
from hermes_protocols.formats.versions import FormatVersionError, checked_version

__all__ = [
    "ATROPOS_MASKED",
    "EVAL_PHASE",
    "FORMAT_KEY",
    "GROUP_FORMAT",
    "MASKED_LOGPROB",
    "RUN_FILE",
    "STATUS_LOGS",
    "TRAINING_ROLLOUTS_DIR",
    "TRAIN_PHASE",
    "TRAJECTORY_FORMAT",
    "AtroposGroup",
    "FormatVersionError",
    "RunDirectory",
    "TokenSequence",
    "TrainingTag",
    "atropos_logprobs",
    "atropos_mask",
    "check_trajectory_version",
    "checked_version",
    "token_fields",
    "training_rollouts",
    "trajectory_sequence",
]
