"""terminal_bench: Terminal-Bench 2 / Harbor tasks (directories and dataset rows)."""

from hermes_envs.terminal_bench.env import TerminalBenchConfig, TerminalBenchEnv
from hermes_envs.terminal_bench.task import (
    TbTask,
    load_rows_jsonl,
    load_task_dir,
    parse_row,
    sample_task_dirs,
)

__all__ = [
    "TbTask",
    "TerminalBenchConfig",
    "TerminalBenchEnv",
    "load_rows_jsonl",
    "load_task_dir",
    "parse_row",
    "sample_task_dirs",
]
