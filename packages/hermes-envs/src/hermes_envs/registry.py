"""Environments looked up by name, each with its own typed attrs config class."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs
import cattrs
from hermes_protocols import ConfigError, Environment, EnvironmentNotFound

C = TypeVar("C")


@attrs.frozen(slots=True)
class EnvSpec(Generic[C]):
    """How to build one environment: its name, config class and factory."""

    name: str
    config_type: type[C]
    factory: Callable[[C], Environment]
    description: str = ""


def _describe(exc: BaseException, type_: type | None) -> str:
    """A config validator's own message, cattrs' wording for type errors."""
    if isinstance(exc, ConfigError):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


class EnvRegistry:
    """A name -> :class:`EnvSpec` table. Build one per app (``default_registry()``)."""

    def __init__(self, specs: Iterable[EnvSpec[Any]] = ()) -> None:
        self._specs: dict[str, EnvSpec[Any]] = {}
        self._converter = cattrs.Converter(forbid_extra_keys=True)
        for spec in specs:
            self.register(spec)

    def register(self, spec: EnvSpec[Any]) -> None:
        if spec.name in self._specs:
            raise ConfigError(f"environment {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def spec(self, name: str) -> EnvSpec[Any]:
        try:
            return self._specs[name]
        except KeyError:
            raise EnvironmentNotFound(
                f"no environment named {name!r}; registered: {', '.join(self.names()) or 'none'}"
            ) from None

    def config(
        self, name: str, values: Mapping[str, Any] | None = None, *, option: str = "options"
    ) -> Any:
        """Build the typed config of ``name`` from plain values (e.g. parsed YAML/CLI); errors
        name each value as ``<option>.<field>`` (``option``: the caller's option name)."""
        spec = self.spec(name)
        try:
            return self._converter.structure(dict(values or {}), spec.config_type)
        except Exception as exc:
            details = "; ".join(
                cattrs.transform_error(exc, path=option, format_exception=_describe)
            )
            raise ConfigError(f"bad config for environment {name!r}: {details}") from exc

    def create(
        self,
        name: str,
        config: object | Mapping[str, Any] | None = None,
        *,
        option: str = "options",
    ) -> Environment:
        """Instantiate ``name`` with a config instance, a mapping of values, or defaults."""
        spec = self.spec(name)
        if config is None or isinstance(config, Mapping):
            config = self.config(name, config, option=option)
        if not isinstance(config, spec.config_type):
            raise ConfigError(
                f"environment {name!r} takes a {spec.config_type.__name__}, "
                f"got {type(config).__name__}"
            )
        return spec.factory(config)
