"""The environment variables commands in a slot start with (never the host's environment)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from hermes_sandbox.backends._host_dirs import SLOT_MARKER_VAR

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@attrs.frozen(slots=True)
class SlotEnv:
    """Base environment of every command: ``PATH``, ``HOME`` = the workspace, UTF-8 locale,
    plus ``extra``; per-command ``env`` overrides all of it. Host variables never leak in."""

    path: str = DEFAULT_PATH
    lang: str = "C.UTF-8"
    extra: Mapping[str, str] = attrs.field(factory=dict)

    def build(self, home: str, marker: str, env: Mapping[str, str] | None) -> dict[str, str]:
        merged = {
            "PATH": self.path,
            "HOME": home,
            "LANG": self.lang,
            "LC_ALL": self.lang,
            "TERM": "dumb",
            "PYTHONUNBUFFERED": "1",
            **self.extra,
            **(env or {}),
        }
        merged[SLOT_MARKER_VAR] = marker
        return merged
