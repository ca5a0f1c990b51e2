"""hermes-rl environments under verifiers 0.4: the taskset package ``hermes-verifiers-env``.

verifiers finds a taskset by its id (``vf-eval hermes-verifiers-env``, ``--env.taskset.id``):
it imports this module and takes the one :class:`verifiers.v1.Taskset` subclass and the one
:class:`verifiers.v1.Harness` subclass named in ``__all__`` (the harness becomes the taskset's
default). :func:`load_environment` builds the same environment in Python.
"""

from __future__ import annotations

from typing import Any

from hermes_verifiers_env.config import (
    TASKSET_ID,
    HermesHarnessConfig,
    HermesTaskData,
    HermesTasksetConfig,
)
from hermes_verifiers_env.harness import HermesHarness
from hermes_verifiers_env.taskset import HermesTask, HermesTaskset
from hermes_verifiers_env.verifiers_import import vf


def load_environment(harness: HermesHarnessConfig | None = None, **taskset: Any) -> Any:
    """A ``vf.SingleAgentEnv`` over our environment: ``taskset`` are the
    :class:`HermesTasksetConfig` fields (``environment``, ``options``, ``seed``, ``split``),
    ``harness`` the rollout settings."""
    config = vf.SingleAgentEnvConfig(
        taskset=HermesTasksetConfig(id=TASKSET_ID, **taskset),
        agent=vf.AgentConfig(
            harness=harness or HermesHarnessConfig(id=TASKSET_ID), runtime=vf.SubprocessConfig()
        ),
    )
    return vf.SingleAgentEnv(config)


__all__ = [
    "TASKSET_ID",
    "HermesHarness",
    "HermesHarnessConfig",
    "HermesTask",
    "HermesTaskData",
    "HermesTaskset",
    "HermesTasksetConfig",
    "load_environment",
]
