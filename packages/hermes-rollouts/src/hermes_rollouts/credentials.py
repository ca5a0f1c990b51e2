"""Credentials come from options or the environment, never from configuration files, and are
never written to disk or shown in a ``repr``."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

API_KEY_VARIABLE = "OPENAI_API_KEY"
SANDBOX_TOKEN_VARIABLE = "HERMES_SANDBOX_TOKEN"
NOMAD_TOKEN_VARIABLE = "NOMAD_TOKEN"


@attrs.frozen(slots=True)
class Credentials:
    """The model server's API key, the remote sandbox servers' bearer token and the Nomad ACL
    token."""

    api_key: str | None = attrs.field(default=None, repr=False)
    sandbox_token: str | None = attrs.field(default=None, repr=False)
    nomad_token: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        *,
        api_key: str | None = None,
        sandbox_token: str | None = None,
    ) -> Credentials:
        """Explicit values (from the command line) win over ``$OPENAI_API_KEY``,
        ``$HERMES_SANDBOX_TOKEN`` and ``$NOMAD_TOKEN``."""
        return cls(
            api_key=api_key or environ.get(API_KEY_VARIABLE) or None,
            sandbox_token=sandbox_token or environ.get(SANDBOX_TOKEN_VARIABLE) or None,
            nomad_token=environ.get(NOMAD_TOKEN_VARIABLE) or None,
        )
