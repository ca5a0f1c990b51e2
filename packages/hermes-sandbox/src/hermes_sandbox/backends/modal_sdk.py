"""The parts of the ``modal`` SDK the modal backend uses, imported only when first needed.

Importing ``modal`` takes seconds, so :meth:`ModalSDK.real` imports it when a
:class:`~hermes_sandbox.backends.modal.ModalBackend` first talks to Modal, never at
``import hermes_sandbox``. Tests pass a fake :class:`ModalSDK` with the same signatures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from hermes_protocols import SandboxError

AUTH_HELP = (
    "Modal credentials are missing or invalid. Run `modal token new` (or set MODAL_TOKEN_ID "
    "and MODAL_TOKEN_SECRET) and try again."
)


class ModalAuthError(SandboxError):
    """No usable Modal token: run ``modal token new`` or set MODAL_TOKEN_ID/MODAL_TOKEN_SECRET."""


@attrs.frozen(slots=True)
class ModalSDK:
    """The parts of the ``modal`` SDK this backend uses (the real module unless a fake is given)."""

    App: Any
    Sandbox: Any
    Image: Any
    Secret: Any
    exceptions: Any
    has_credentials: Callable[[], bool]

    @classmethod
    def real(cls) -> ModalSDK:
        """The installed ``modal`` package (imported here, on first use)."""
        import modal
        import modal.exception
        from modal.config import config

        def has_credentials() -> bool:
            return bool(config.get("token_id")) and bool(config.get("token_secret"))

        return cls(
            App=modal.App,
            Sandbox=modal.Sandbox,
            Image=modal.Image,
            Secret=modal.Secret,
            exceptions=modal.exception,
            has_credentials=has_credentials,
        )


def map_fs_error(errors: Any, exc: BaseException, path: str) -> BaseException:
    """The builtin error (or SandboxError) for a Modal filesystem exception on ``path``."""
    if isinstance(exc, errors.SandboxFilesystemNotFoundError):
        return FileNotFoundError(f"no such file in the sandbox: {path}")
    if isinstance(exc, errors.SandboxFilesystemIsADirectoryError):
        return IsADirectoryError(f"is a directory: {path}")
    if isinstance(exc, errors.SandboxFilesystemPermissionError):
        return PermissionError(f"permission denied: {path}")
    return SandboxError(f"Modal filesystem operation on {path} failed: {exc}")
