"""``EnvironmentSpec`` -> the environment of a session: a registered one or a batch dataset,
with the system prompt override and the prefill demonstration applied."""

from __future__ import annotations

from hermes_envs import default_registry, with_system_prompt
from hermes_envs.prefill import demonstration_path, load_prefill, with_prefill
from hermes_protocols import Environment

from hermes_rollouts.dataset import DatasetEnvironment, load_dataset
from hermes_rollouts.spec import EnvironmentSpec

#: the toolsets the embedded model gets unless told otherwise (its small context and CPU budget)
EMBEDDED_TOOLSETS: tuple[str, ...] = ("terminal",)


def default_toolsets(
    enabled: tuple[str, ...] | None, *, embedded: bool, distribution: str | None, dataset: bool
) -> tuple[str, ...] | None:
    """The enabled toolsets: the given ones; else terminal only for the embedded model on a
    registered environment; else ``None`` (the environment's own, or the distribution's)."""
    if enabled:
        return enabled
    if embedded and distribution is None and not dataset:
        return EMBEDDED_TOOLSETS
    return None


def default_prefill(
    given: str | None, *, embedded: bool, enabled: tuple[str, ...] | None, dataset: bool
) -> str | None:
    """The prefill file: the given one (``"none"`` turns it off); by default the shipped
    terminal demonstration when the embedded model runs a registered environment with the
    terminal tool only (a 135M model calls no tool without one)."""
    if given == "none":
        return None
    if given:
        return given
    if embedded and enabled == EMBEDDED_TOOLSETS and not dataset:
        return str(demonstration_path("terminal"))
    return None


def build_environment(spec: EnvironmentSpec) -> Environment:
    """The environment ``spec`` describes (not started: environments hold no resources)."""
    environment: Environment
    if spec.dataset:
        loaded = load_dataset(spec.dataset, skip_bad_lines=spec.skip_bad_lines)
        environment = DatasetEnvironment(
            loaded.items, spec.dataset_toolsets, system_prompt=spec.system_prompt
        )
    else:
        environment = with_system_prompt(
            default_registry().create(spec.name, spec.options or None), spec.system_prompt
        )
    if spec.prefill_messages:
        environment = with_prefill(environment, load_prefill(spec.prefill_messages))
    return environment
