"""``EnvironmentSpec`` -> the environment of a session: any environment reference (resolved by
:func:`hermes_rollouts.resolve_environment`: a shipped or installed name, a module or a file)
or a batch dataset, with the system prompt override and the prefill demonstration applied."""

from __future__ import annotations

from collections.abc import Mapping

from hermes_envs import DatasetError, with_system_prompt
from hermes_envs.prefill import demonstration_path, load_prefill, with_prefill
from hermes_protocols import ConfigError, Environment

from hermes_rollouts.dataset import DatasetEnvironment, load_dataset
from hermes_rollouts.option_names import OptionNames
from hermes_rollouts.plugins import resolve_environment
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


def environment_check(
    spec: EnvironmentSpec, names: OptionNames | None = None
) -> tuple[list[str], Environment | None]:
    """Every problem of ``spec`` (each naming the caller's option) and, when there is none,
    its environment: the reference resolved and built once."""
    name = names or OptionNames()
    problems: list[str] = []
    environment: Environment | None = None
    if spec.dataset:
        try:
            loaded = load_dataset(spec.dataset, skip_bad_lines=spec.skip_bad_lines)
        except DatasetError as exc:
            problems.append(f"{name('environment.dataset')}: {exc}")
        else:
            environment = DatasetEnvironment(
                loaded.items, spec.dataset_toolsets, system_prompt=spec.system_prompt
            )
    else:
        try:
            plugin = resolve_environment(spec.name, option=name("environment.name"))
            built = plugin.create(spec.options, option=name("environment.options"))
        except ConfigError as exc:
            problems.append(str(exc))
        else:
            environment = with_system_prompt(built, spec.system_prompt)
    if spec.prefill_messages:
        try:
            prefill = load_prefill(spec.prefill_messages)
        except DatasetError as exc:
            problems.append(f"{name('environment.prefill_messages')}: {exc}")
        else:
            if environment is not None:
                environment = with_prefill(environment, prefill)
    return problems, None if problems else environment


def build_environment(
    spec: EnvironmentSpec, option_names: Mapping[str, str] | None = None
) -> Environment:
    """The environment ``spec`` describes (not started: environments hold no resources);
    raises one :class:`ConfigError` listing its problems."""
    problems, environment = environment_check(spec, OptionNames(option_names))
    if problems or environment is None:
        raise ConfigError("; ".join(problems))
    return environment
