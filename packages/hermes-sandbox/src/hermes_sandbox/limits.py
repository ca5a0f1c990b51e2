"""Per-command resource limits, applied as rlimits inside the slot."""

from __future__ import annotations

import resource

import attrs
from hermes_protocols import ConfigError


@attrs.frozen(slots=True)
class ResourceLimits:
    """Limits applied to every command of a slot (``None`` = not limited).

    The executor sets them (soft = hard) before the command starts, so the command cannot
    raise them. ``max_processes`` is RLIMIT_NPROC, which counts processes *per uid* and is not
    enforced for root: it binds only when commands run as an unprivileged uid (the bwrap backend
    started as root gives every slot its own uid).

    ``disk_bytes`` is the per-slot disk limit: the size of the slot's filesystem (a tmpfs
    mounted where hermes may mount, i.e. as root) holding its workspace and, on bwrap, its
    ``/tmp`` and ``/dev/shm``; docs/sandbox.md says what each backend enforces.

    ``slot_memory_bytes``, ``slot_processes`` and ``slot_cpus`` (a CFS quota, in CPUs) bind all
    processes of a slot together, through the slot's cgroups where they can be made. A pool
    clamps slot memory and disk so that all its slots fit the machine
    (:mod:`hermes_sandbox.budget`).
    """

    memory_bytes: int | None = 4 << 30
    cpu_seconds: int | None = None
    max_processes: int | None = 512
    file_size_bytes: int | None = 8 << 30
    open_files: int | None = 4096
    slot_memory_bytes: int | None = 8 << 30
    slot_processes: int | None = 1024
    disk_bytes: int | None = 2 << 30
    slot_cpus: float | None = 1.0

    def __attrs_post_init__(self) -> None:
        if self.slot_cpus is not None and self.slot_cpus <= 0:
            raise ConfigError("ResourceLimits.slot_cpus must be positive (or None: no limit)")

    def rlimits(self) -> tuple[tuple[int, int], ...]:
        """``(resource, value)`` pairs (soft = hard) for the command executor."""
        pairs = (
            (resource.RLIMIT_AS, self.memory_bytes),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_NPROC, self.max_processes),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_NOFILE, self.open_files),
        )
        return tuple((res, value) for res, value in pairs if value is not None)
