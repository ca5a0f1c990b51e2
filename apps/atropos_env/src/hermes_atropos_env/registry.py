"""Environment registry and parser names as the adapter sees them, and the mapping of the
hermes-agent dataset fields (``dataset_name``, ``dataset_split``) onto environment configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hermes_parsers
from hermes_envs import EndlessTerminalsConfig, EndlessTerminalsEnv, EnvRegistry, EnvSpec
from hermes_envs.swe_smith import SweSmithConfig, SweSmithOracleEnv
from hermes_protocols import ToolCallParser

from hermes_atropos_env.config import HermesAtroposEnvConfig


def build_registry() -> EnvRegistry:
    """A fresh registry with every shipped environment."""
    return EnvRegistry(
        [
            EnvSpec(
                "endless_terminals",
                EndlessTerminalsConfig,
                EndlessTerminalsEnv,
                "procedural terminal tasks with end-state verifiers",
            ),
            EnvSpec(
                "swe_smith_oracle",
                SweSmithConfig,
                SweSmithOracleEnv,
                "SWE-smith bug fixes verified by pytest node ids",
            ),
        ]
    )


def parser_names() -> tuple[str, ...]:
    return tuple(hermes_parsers.list_parsers())


def get_parser(name: str) -> ToolCallParser:
    parser: ToolCallParser = hermes_parsers.get_parser(name)
    return parser


def environment_options(env: HermesAtroposEnvConfig) -> dict[str, Any]:
    """Environment config values derived from ``--env.dataset_*`` (empty = its defaults).

    ``swe_smith_oracle``: a ``.jsonl`` path reads that file, any other name is a Hub dataset
    (with ``dataset_split``); unset uses the shipped offline fixtures.
    """
    options: dict[str, Any] = {}
    if env.environment == "swe_smith_oracle" and env.dataset_name:
        if env.dataset_name.endswith(".jsonl") or Path(env.dataset_name).is_file():
            options.update(source="jsonl", jsonl_path=env.dataset_name)
        else:
            options.update(source="hf", hf_dataset=env.dataset_name, hf_split=env.dataset_split)
    return options
