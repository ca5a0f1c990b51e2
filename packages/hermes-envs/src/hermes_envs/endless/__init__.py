"""endless_terminals: seeded, procedurally generated terminal tasks with oracle solutions."""

from hermes_envs.endless.env import (
    FAMILIES,
    EndlessTerminalsConfig,
    EndlessTerminalsEnv,
    generate_task,
)
from hermes_envs.endless.task import TerminalTask

__all__ = [
    "FAMILIES",
    "EndlessTerminalsConfig",
    "EndlessTerminalsEnv",
    "TerminalTask",
    "generate_task",
]
