"""Credentials come from options or the environment and are never written to disk."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

API_KEY_VARIABLE = "OPENAI_API_KEY"
SANDBOX_TOKEN_VARIABLE = "HERMES_SANDBOX_TOKEN"
NOMAD_TOKEN_VARIABLE = "NOMAD_TOKEN"


@attrs.frozen(slots=True)
class Credentials:
    """The model server's API key, the remote sandbox servers' bearer token and the Nomad ACL
    token (``$NOMAD_TOKEN``)."""

    api_key: str | None = attrs.field(default=None, repr=False)
    sandbox_token: str | None = attrs.field(default=None, repr=False)
    nomad_token: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_args(
        cls, api_key: str | None, sandbox_token: str | None, environ: Mapping[str, str]
    ) -> Credentials:
        return cls(
            api_key=api_key or environ.get(API_KEY_VARIABLE) or None,
            sandbox_token=sandbox_token or environ.get(SANDBOX_TOKEN_VARIABLE) or None,
            nomad_token=environ.get(NOMAD_TOKEN_VARIABLE) or None,
        )
