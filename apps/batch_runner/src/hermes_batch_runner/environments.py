"""``--env NAME`` or ``--dataset FILE`` -> an environment and the items of this run."""

from __future__ import annotations

import itertools

from hermes_envs import default_registry, with_system_prompt
from hermes_envs.prefill import load_prefill, with_prefill
from hermes_protocols import Environment, Item

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.dataset import DatasetEnvironment, load_dataset

DATASET_TOOLSETS = ("terminal", "file")


def build_environment(config: RunConfig) -> tuple[Environment, list[Item]]:
    """The environment of the run and its first ``item_limit`` items (deterministic by seed)."""
    environment: Environment
    if config.dataset:
        loaded = load_dataset(config.dataset, skip_bad_lines=config.on_bad_line == "skip")
        environment = DatasetEnvironment(
            loaded.items, DATASET_TOOLSETS, system_prompt=config.system_prompt
        )
    else:
        environment = with_system_prompt(
            default_registry().create(config.env), config.system_prompt
        )
    if config.prefill_file:
        environment = with_prefill(environment, load_prefill(config.prefill_file))
    items = environment.items(seed=config.seed)
    limit = config.item_limit
    chosen = list(items if limit is None else itertools.islice(items, limit))
    return environment, chosen
