"""Configuration of the modal backend and its sandbox-creation limiter.

The sandbox lifetime is derived from the rollout and verification budgets so a sandbox always
outlives them; creation is rate limited and the number of sandboxes still starting is capped
(Modal rejects bursts with "Sandbox creation rate limit exceeded").
"""

from __future__ import annotations

import math
import posixpath
import time
from collections.abc import Mapping
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError

MODAL_MAX_LIFETIME_S = 24 * 3600


def _positive(_: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and value <= 0:
        raise ConfigError(f"ModalConfig.{attribute.name} must be positive, got {value}")


@attrs.frozen(slots=True, kw_only=True)
class ModalConfig:
    """How Modal sandboxes are made.

    Exactly one of ``image`` (a registry tag such as ``python:3.12-slim``) and ``dockerfile``
    (a path) is given. The sandbox ``timeout`` is ``rollout_timeout_s + verification_timeout_s
    + lifetime_margin_s`` unless ``sandbox_timeout_s`` is set, which must then be longer than
    rollout plus verification. Defaults for the creation limits stay under Modal's documented
    sandbox creation rate limit (bursts fail with "Sandbox creation rate limit exceeded").
    """

    app_name: str = "hermes-sandbox"
    image: str | None = "python:3.12-slim"
    dockerfile: str | None = None
    cpu: float | None = attrs.field(default=1.0, validator=_positive)
    memory_mb: int | None = attrs.field(default=2048, validator=_positive)
    gpu: str | None = None
    rollout_timeout_s: float = attrs.field(default=1800.0, validator=_positive)
    verification_timeout_s: float = attrs.field(default=300.0, validator=_positive)
    lifetime_margin_s: float = attrs.field(default=300.0, validator=_positive)
    sandbox_timeout_s: float | None = attrs.field(default=None, validator=_positive)
    idle_timeout_s: float | None = attrs.field(default=None, validator=_positive)
    secrets: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    block_network: bool = True
    creations_per_second: float = attrs.field(default=4.0, validator=_positive)
    max_starting: int = attrs.field(default=20, validator=_positive)
    workspace_root: str = "/workspace"
    """Slot ``i`` works in ``<workspace_root>/slot-<i>``; ``{host_id}`` is substituted."""
    max_output_bytes: int = attrs.field(default=1 << 20, validator=_positive)
    environment_name: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.image is None) == (self.dockerfile is None):
            raise ConfigError("ModalConfig needs exactly one of image= or dockerfile=")
        if not posixpath.isabs(self.workspace_root):
            raise ConfigError("ModalConfig.workspace_root must be an absolute path")
        self.lifetime_s()

    def lifetime_s(self) -> int:
        """The sandbox ``timeout``: always longer than rollout plus verification."""
        needed = self.rollout_timeout_s + self.verification_timeout_s
        if self.sandbox_timeout_s is not None:
            if self.sandbox_timeout_s <= needed:
                raise ConfigError(
                    f"sandbox_timeout_s={self.sandbox_timeout_s} is not longer than rollout "
                    f"({self.rollout_timeout_s}s) plus verification "
                    f"({self.verification_timeout_s}s): the sandbox would die mid-rollout; "
                    "raise it or leave it unset to derive it"
                )
            lifetime = self.sandbox_timeout_s
        else:
            lifetime = needed + self.lifetime_margin_s
        if lifetime > MODAL_MAX_LIFETIME_S:
            raise ConfigError(
                f"derived sandbox lifetime {lifetime:.0f}s exceeds Modal's 24 h maximum; "
                "shorten the rollout or verification timeouts"
            )
        return math.ceil(lifetime)


class CreationLimiter:
    """At most ``rate`` creations per second and ``max_starting`` creations in flight."""

    def __init__(self, rate: float, max_starting: int) -> None:
        self._interval = 1.0 / rate
        self._next = 0.0
        self._lock = anyio.Lock()
        self.starting = anyio.Semaphore(max_starting)

    async def wait_turn(self) -> None:
        """Return at least ``1 / rate`` seconds after the previous caller returned (the wait
        holds the lock: a turn delayed by a busy loop never lets the next one follow closer)."""
        async with self._lock:
            delay = self._next - time.monotonic()
            if delay > 0:
                await anyio.sleep(delay)
            self._next = time.monotonic() + self._interval
