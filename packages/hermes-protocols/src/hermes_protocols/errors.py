"""Error types shared by every hermes-rl package.

Each error names what went wrong and, where possible, what to do about it.
"""

from __future__ import annotations


class HermesError(Exception):
    """Base class for every error raised by hermes-rl."""


class ConversionError(HermesError, ValueError):
    """Input data does not match the wire format it claims to be (OpenAI, ShareGPT, ...)."""


class ConfigError(HermesError, ValueError):
    """A configuration value makes no sense; the message says what to change."""


class BackendError(HermesError):
    """An inference backend failed (after its retries) or answered something unusable."""


class BackendTimeout(BackendError, TimeoutError):
    """An inference request did not finish within its timeout."""


class ToolError(HermesError):
    """A tool could not be executed."""


class ToolArgumentError(ToolError, ValueError):
    """Tool arguments are missing, malformed or violate the tool's JSON schema."""


class SandboxError(HermesError):
    """A sandbox backend failed: the host died, a command could not be started, ..."""


class SandboxTimeout(SandboxError, TimeoutError):
    """A sandbox operation did not finish within its timeout."""


class AcquireTimeout(SandboxTimeout):
    """No slot became free within the acquire timeout; raise max_hosts or the timeout."""


class ImageUnavailable(SandboxError):
    """A container image a slot needs can be neither found, pulled nor built."""


class IsolationUnavailable(SandboxError):
    """Isolation was required but cannot be provided on this machine."""


class WorkspaceEscape(SandboxError, PermissionError):
    """A path resolves outside the slot's workspace (``..``, absolute path or symlink)."""


class EnvironmentNotFound(HermesError, KeyError):
    """No environment is registered under the requested name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "environment not found"
