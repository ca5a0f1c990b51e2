"""Parser names as the adapter sees them, and the mapping of the hermes-agent dataset fields
(``dataset_name``, ``dataset_split``) onto environment configs. Environments come from
``hermes_envs.default_registry()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hermes_parsers
from hermes_protocols import ToolCallParser

from hermes_atropos_env.config import HermesAtroposEnvConfig


def parser_names() -> tuple[str, ...]:
    return tuple(hermes_parsers.list_parsers())


def get_parser(name: str) -> ToolCallParser:
    parser: ToolCallParser = hermes_parsers.get_parser(name)
    return parser


def environment_options(env: HermesAtroposEnvConfig) -> dict[str, Any]:
    """Environment config values derived from ``--env.dataset_*`` (empty = its defaults).

    ``swe_smith_oracle``: a ``.jsonl`` path reads that file, any other name is a Hub dataset
    (with ``dataset_split``); unset uses the shipped offline fixtures. ``terminal_bench``: a
    ``.jsonl`` file of TB2 rows or a task directory, instead of the shipped sample tasks.
    """
    options: dict[str, Any] = {}
    if env.environment == "terminal_bench" and env.dataset_name:
        if Path(env.dataset_name).is_dir():
            options.update(task_dirs=[env.dataset_name], include_samples=False)
        else:
            options.update(rows_path=env.dataset_name, include_samples=False)
    if env.environment == "swe_smith_oracle" and env.dataset_name:
        if env.dataset_name.endswith(".jsonl") or Path(env.dataset_name).is_file():
            options.update(source="jsonl", jsonl_path=env.dataset_name)
        else:
            options.update(source="hf", hf_dataset=env.dataset_name, hf_split=env.dataset_split)
    return options
