"""Environment references -> environments: the one resolver of every app and of the check.

A reference (the batch runner's and the trainer's ``--env``, the Atropos adapter's
``--env.environment``, ``hermes-envs check ENV``) is

- a name: a shipped environment (``endless_terminals``, ...) or one an installed package
  registers in the entry-point group ``hermes_rl.environments``
  (:data:`~hermes_rollouts.plugin_loading.ENTRY_POINT_GROUP`);
- ``package.module:attr`` (an importable module) or ``path/to/file.py:attr`` (a file anywhere).

The object found is a :class:`hermes_envs.EnvSpec`; a class or factory whose first parameter
is annotated with its config type (an attrs class or dataclass; the options are structured
into it) or that takes no parameter (no options); or a ready environment object. Each way a
reference can be wrong is one :class:`PluginError` line.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs
from hermes_envs import EnvRegistry, EnvSpec, default_registry
from hermes_protocols import ConfigError, Environment

from hermes_rollouts.plugin_loading import (
    ENTRY_POINT_GROUP,
    PluginError,
    entry_points,
    load_entry_point,
    load_target,
    split_target,
)

#: what an environment must have (the members of :class:`hermes_protocols.Environment`)
PROTOCOL_MEMBERS: tuple[str, ...] = tuple(n for n in vars(Environment) if not n.startswith("_"))
_ASYNC_MEMBERS = ("setup_workspace", "verify")
#: the members a class must define itself (``name`` and ``toolsets`` may be set per instance)
_METHODS = tuple(n for n in PROTOCOL_MEMBERS if inspect.isfunction(vars(Environment)[n]))


@attrs.frozen(slots=True)
class NoOptions:
    """The config of an environment that takes none."""


@attrs.frozen(slots=True)
class EnvironmentPlugin:
    """What a reference resolved to: its :class:`EnvSpec`, where it came from (``shipped``,
    ``entry point <value>``, ``module <name>``, ``file <path>``) and whether it takes
    options."""

    reference: str
    spec: EnvSpec[Any]
    origin: str
    option: str = "--env"

    @property
    def takes_options(self) -> bool:
        return self.spec.config_type is not NoOptions

    def create(
        self, options: Mapping[str, Any] | None = None, *, option: str = "options"
    ) -> Environment:
        """The environment with ``options`` structured into its config (errors name each value
        ``<option>.<field>``); raises :class:`PluginError` for an object that is no
        environment."""
        if options and not self.takes_options:
            raise PluginError(
                f"{option}: environment {self.spec.name!r} takes no options; drop {option}"
            )
        try:
            environment = EnvRegistry([self.spec]).create(self.spec.name, options, option=option)
        except PluginError:
            raise
        except ConfigError as exc:
            raise ConfigError(f"{option}: {exc}") from exc
        problem = environment_problem(environment)
        if problem is not None:
            raise PluginError(
                f"{self.option}: {self.reference} ({self.origin}) is not an environment: {problem}"
            )
        return environment


def environment_problem(value: object) -> str | None:
    """Why ``value`` does not satisfy :class:`hermes_protocols.Environment` (``None``: it
    does): the members it lacks, or the ones that must be ``async def``."""
    missing = [m for m in PROTOCOL_MEMBERS if not hasattr(value, m)]
    kind = type(value).__name__
    if missing:
        return f"{kind} lacks {', '.join(missing)} (see hermes_protocols.Environment)"
    sync = [m for m in _ASYNC_MEMBERS if not inspect.iscoroutinefunction(getattr(value, m))]
    if sync:
        return f"{kind}.{' and '.join(sync)} must be async def (see hermes_protocols.Environment)"
    return None


def resolve_environment(reference: str, *, option: str = "--env") -> EnvironmentPlugin:
    """The environment ``reference`` names (see the module doc); ``option`` is the caller's
    option, named in every error."""
    target = split_target(reference)
    if target is not None:
        found, origin = load_target(*target, option)
        return _plugin(
            reference, found, origin, default_name=target[1].rpartition(".")[2], option=option
        )
    shipped = default_registry()
    if reference in shipped.names():
        return EnvironmentPlugin(reference, shipped.spec(reference), "shipped", option)
    point = entry_points().get(reference)
    if point is None:
        raise PluginError(
            f"unknown environment {reference!r}: set {option} to one of "
            f"{', '.join(environment_names())} (installed: group {ENTRY_POINT_GROUP}), or to "
            "package.module:NAME or path/to/file.py:NAME"
        )
    found = load_entry_point(point, option)
    return _plugin(
        reference, found, f"entry point {point.value}", default_name=reference, option=option
    )


def reference_slug(reference: str) -> str:
    """A short name for file names, pool names and run titles: the reference itself when it
    is a name, else its attribute (``path/to/my_env.py:MyEnv`` -> ``MyEnv``), with every
    character but letters, digits and ``_`` replaced by ``_``."""
    target = split_target(reference)
    short = target[1].rpartition(".")[2] if target is not None else reference
    return re.sub(r"\W", "_", short, flags=re.ASCII) or "env"


def environment_names() -> tuple[str, ...]:
    """The shipped and the installed environment names, sorted."""
    return tuple(sorted({*default_registry().names(), *entry_points()}))


@attrs.frozen(slots=True)
class EnvironmentInfo:
    """One available environment: its name, one-line description and origin."""

    name: str
    description: str
    origin: str


def available_environments() -> tuple[EnvironmentInfo, ...]:
    """The shipped environments, then the installed ones (each loaded for its description; one
    that cannot be loaded says why). A shipped name wins over an installed one."""
    shipped = default_registry()
    found = [EnvironmentInfo(n, shipped.spec(n).description, "shipped") for n in shipped.names()]
    for name, point in sorted(entry_points().items()):
        origin = f"entry point {point.value}"
        if name in shipped.names():
            found.append(
                EnvironmentInfo(name, "ignored: a shipped environment has this name", origin)
            )
            continue
        try:
            description = resolve_environment(name).spec.description
        except PluginError as exc:
            description = f"cannot be loaded: {exc}"
        found.append(EnvironmentInfo(name, description, origin))
    return tuple(found)


def environments_text() -> str:
    """The available environments as the lines ``--list-envs`` and ``hermes-envs list``
    print, and how to name any other one."""
    infos = available_environments()
    width = max(len(i.name) for i in infos)
    lines = [f"{i.name:<{width}}  {i.description}  [{i.origin}]" for i in infos]
    lines.append(
        f"also: package.module:NAME, path/to/file.py:NAME, or a package's {ENTRY_POINT_GROUP} "
        "entry point (docs/environments.md)"
    )
    return "\n".join(lines)


def _plugin(
    reference: str, found: object, origin: str, *, default_name: str, option: str
) -> EnvironmentPlugin:
    if isinstance(found, EnvSpec):
        _check_config_type(found.config_type, reference, option)
        return EnvironmentPlugin(reference, found, origin, option)
    name = getattr(found, "name", None)
    name = name if isinstance(name, str) else default_name
    description = _first_line(inspect.getdoc(found))
    factory: Callable[[Any], Environment]
    if not _is_factory(found):
        problem = environment_problem(found)
        if problem is not None:
            raise PluginError(f"{option}: {reference} ({origin}) is not an environment: {problem}")
        ready = typing.cast(Environment, found)
        factory = lambda _config: ready  # noqa: E731
        spec = EnvSpec(name, NoOptions, factory, description)
        return EnvironmentPlugin(reference, spec, origin, option)
    if isinstance(found, type):
        lacking = [m for m in _METHODS if not callable(getattr(found, m, None))]
        if lacking:
            raise PluginError(
                f"{option}: {reference} ({origin}) is not an environment: class "
                f"{found.__qualname__} lacks {', '.join(lacking)} (see "
                "hermes_protocols.Environment)"
            )
    make = typing.cast(Callable[..., Environment], found)
    config_type = _config_type(make, reference, option)
    if config_type is None:
        config_type, factory = NoOptions, lambda _config: make()
    else:
        _check_config_type(config_type, reference, option)
        factory = make
    return EnvironmentPlugin(
        reference, EnvSpec(name, config_type, factory, description), origin, option
    )


def _is_factory(found: object) -> bool:
    """A class or function builds the environment; an object that is an environment is one."""
    if isinstance(found, type) or inspect.isroutine(found):
        return True
    return callable(found) and environment_problem(found) is not None


def _first_line(doc: str | None) -> str:
    return doc.strip().splitlines()[0] if doc and doc.strip() else ""


def _config_type(found: Callable[..., Any], reference: str, option: str) -> type | None:
    """The annotation of the first parameter of ``found`` (``None``: it takes none), with
    ``| None`` dropped."""
    try:
        signature = inspect.signature(found, eval_str=True)
    except (TypeError, ValueError):
        return None
    except NameError as exc:
        raise PluginError(
            f"{option}: {reference}'s annotations cannot be evaluated ({exc}); import what "
            "they name at module level"
        ) from exc
    parameters = [
        p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not parameters:
        return None
    first, rest = parameters[0], parameters[1:]
    required = [p.name for p in rest if p.default is p.empty]
    if required:
        raise PluginError(
            f"{option}: {reference} needs {', '.join(required)} besides its config; an "
            "environment factory takes one config parameter (or none)"
        )
    annotation = first.annotation
    if annotation is first.empty:
        if first.default is not first.empty:
            return None
        raise PluginError(
            f"{option}: {reference} takes {first.name!r} without a type annotation; annotate it "
            "with the environment's config class (an attrs class or dataclass)"
        )
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else annotation
    if not isinstance(annotation, type):
        raise PluginError(
            f"{option}: {reference}'s config annotation {annotation!r} is not a class; use an "
            "attrs class or dataclass"
        )
    return annotation


def _check_config_type(config_type: type, reference: str, option: str) -> None:
    """A config class cattrs can structure plain options into, or one :class:`PluginError`."""
    if not (attrs.has(config_type) or dataclasses.is_dataclass(config_type)):
        raise PluginError(
            f"{option}: {reference}'s config type {config_type.__qualname__} is not an attrs "
            "class or dataclass, so its options cannot be structured; make it one"
        )
    try:
        cattrs.Converter(forbid_extra_keys=True).get_structure_hook(config_type)
    except Exception as exc:
        reason = " ".join(str(exc).split())
        raise PluginError(
            f"{option}: cattrs cannot structure options into {reference}'s config type "
            f"{config_type.__qualname__} ({reason}); use JSON-like field types"
        ) from exc
