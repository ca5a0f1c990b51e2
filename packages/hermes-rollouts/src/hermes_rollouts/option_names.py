"""Spec paths -> the caller's option names, for every error message of the assembly."""

from __future__ import annotations

from collections.abc import Mapping


class OptionNames:
    """Spec paths (``"model.base_url"``, ``"environment.name"``) -> the caller's option names
    (``"--model-url"``, ``"--env.environment"``); an unmapped path is shown as it is."""

    def __init__(self, names: Mapping[str, str] | None = None) -> None:
        self._names = dict(names or {})

    def __call__(self, path: str) -> str:
        return self._names.get(path, path)

    def section(self, prefix: str) -> dict[str, str]:
        """The names of one section, keyed by field (what the package factories take)."""
        start = f"{prefix}."
        return {k[len(start) :]: v for k, v in self._names.items() if k.startswith(start)}
