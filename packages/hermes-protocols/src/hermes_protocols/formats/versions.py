"""Format versions of the files hermes-rl writes, and the one-line refusal of another one."""

from __future__ import annotations

from hermes_protocols.errors import HermesError


class FormatVersionError(HermesError):
    """A record or group was written in a format version this reader does not know."""


def checked_version(found: object, *, kind: str, current: int, where: str) -> int:
    """``found`` (the version a record carries; ``None``: written before versions, i.e. 1) if
    it is ``current``; otherwise :class:`FormatVersionError` saying which is which."""
    version = 1 if found is None else found
    if version != current:
        raise FormatVersionError(
            f"{where} is a {kind} of format version {version!r}; this hermes-rl reads version "
            f"{current}: read it with the hermes-rl that wrote it"
        )
    return current
