"""Errors raised by hermes-parsers (``parse`` itself never raises)."""

from __future__ import annotations

from hermes_protocols.errors import ConfigError, HermesError


class RenderError(HermesError, ValueError):
    """The format cannot represent this turn (a delimiter inside content, a name the syntax
    cannot carry, ...); the message names the value and the reason."""


class UnknownParserError(ConfigError):
    """No parser is registered under the requested name; the message lists the valid names."""
