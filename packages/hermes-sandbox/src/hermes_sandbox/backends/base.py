"""The contract between the slot pool and a sandbox backend.

A *backend* starts *hosts* (a local directory tree, a container, a Modal sandbox, a Nomad
allocation, a remote sandbox server); each host offers ``slots`` workspaces. The pool owns
scaling, acquire/release, health checks and teardown; a backend only knows how to start, probe,
reset and stop its hosts, and how to find hosts a killed earlier run left behind.

Every method that waits must respect cancellation and release what it started when cancelled.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs
from hermes_protocols import Slot, SlotImage


@attrs.frozen(slots=True)
class HostSpec:
    """What the pool asks a backend for: a host with ``slots`` workspaces.

    ``pool_name`` is the label/tag/name prefix used to find orphans; ``host_id`` is unique
    within the pool and embeds ``pool_name``.
    """

    pool_name: str
    host_id: str
    slots: int


@runtime_checkable
class Host(Protocol):
    """One running sandbox instance with a fixed number of slot workspaces."""

    @property
    def host_id(self) -> str: ...

    def slot(self, index: int) -> Slot:
        """The slot object for workspace ``index`` (0 <= index < slots)."""
        ...

    async def reset_slot(self, index: int) -> None:
        """Empty workspace ``index`` and kill anything still running in it."""
        ...

    async def healthy(self) -> bool:
        """A cheap liveness probe; ``False`` makes the pool replace the host."""
        ...

    async def close(self) -> None:
        """Stop the host and remove everything it created. Idempotent."""
        ...


@runtime_checkable
class HostBackend(Protocol):
    """Starts hosts and sweeps orphans of one kind (local, bwrap, docker, modal, nomad, remote)."""

    @property
    def name(self) -> str: ...

    async def start_host(self, spec: HostSpec) -> Host: ...

    async def sweep_orphans(self, pool_name: str) -> int:
        """Remove hosts left by a killed earlier run of ``pool_name``; return how many."""
        ...


@runtime_checkable
class ImageHostBackend(HostBackend, Protocol):
    """A backend whose hosts can run a given image (containers): the pool's
    :meth:`~hermes_sandbox.SandboxPool.acquire_image` needs one."""

    async def start_image_host(self, spec: HostSpec, image: SlotImage) -> Host:
        """A host of one slot (``spec.slots == 1``) running ``image``, its workspace at
        ``image.workdir`` when set; raises ``ImageUnavailable`` when the image cannot be had."""
        ...
