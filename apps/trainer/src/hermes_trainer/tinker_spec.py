"""Where the trainer's Tinker model lives (``--tinker-url``, ``--tinker-model``,
``--tinker-tokenizer``, ``--tinker-timeout``); free of the Tinker SDK, so the command line
checks these options before it loads."""

from __future__ import annotations

import attrs
from hermes_protocols import ConfigError

#: seconds a Tinker call may take unless ``--tinker-timeout`` says otherwise
DEFAULT_TIMEOUT_S = 600.0


def _positive_seconds(_inst: object, _attribute: object, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"--tinker-timeout must be > 0 seconds, got {value}")


@attrs.frozen(kw_only=True)
class TinkerSpec:
    """A Tinker server and the model to train there. ``url`` ``None``: Thinking Machines'
    service (``$TINKER_API_KEY``); ``tokenizer``: the model's HF tokenizer directory (default:
    ``base_model`` itself, a directory on a local server); ``timeout_s`` bounds every call
    (``--tinker-timeout``)."""

    base_model: str
    url: str | None = None
    tokenizer: str | None = None
    timeout_s: float = attrs.field(default=DEFAULT_TIMEOUT_S, validator=_positive_seconds)

    @property
    def tokenizer_dir(self) -> str:
        return self.tokenizer or self.base_model
