"""The slot pool: hosts x slots, scaling, acquire/release with reset, health, leak-proof teardown.

A host offers ``slots_per_host`` slots. The pool starts ``min_hosts`` hosts on entry, starts
more (up to ``max_hosts``) when acquires wait, stops hosts idle longer than ``idle_timeout``,
replaces hosts that fail their health check, and on exit (normal, error or cancellation) stops
every host. On entry it first fits the slot limits to the machine (backends whose slots run
here) and removes what killed earlier runs left. A host that fails to start is retried after
an exponential backoff with jitter (0.5 s doubling up to ``start_backoff_cap``), never in a
tight loop; an acquire that times out while starts fail names the start failure.

An item that brings its own image (a terminal-bench task) gets a host of its own running that
image (:meth:`SandboxPool.acquire_image`, on a backend that runs images): started on acquire,
removed on release, at most ``max_hosts * slots_per_host`` of them at once.
"""

from __future__ import annotations

import logging
import math
import random
import re
import statistics
import time
import uuid
from collections import deque
from types import TracebackType

import anyio
import attrs
from anyio.abc import TaskGroup
from hermes_protocols import (
    AcquireTimeout,
    ConfigError,
    PoolStats,
    SandboxError,
    Slot,
    SlotImage,
)

from hermes_sandbox.backends._host_dirs import HOST_ID_SEPARATOR
from hermes_sandbox.backends.base import (
    Host,
    HostBackend,
    HostSpec,
    ImageHostBackend,
    MachineSlotsBackend,
)
from hermes_sandbox.budget import MachineBudget

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]*(-[A-Za-z0-9_.]+)*$")
_BACKOFF_BASE_S = 0.5


@attrs.define
class _HostEntry:
    host: Host
    free: list[int]
    leased: dict[int, str] = attrs.field(factory=dict)
    idle_since: float = attrs.field(factory=time.monotonic)


@attrs.frozen(slots=True)
class PoolConfig:
    """Sizing and timing of a :class:`SandboxPool` (seconds for every duration)."""

    name: str = "hermes"
    slots_per_host: int = 4
    min_hosts: int = 0
    max_hosts: int = 8
    idle_timeout: float = 300.0
    acquire_timeout: float = 120.0
    reset_on_release: bool = True
    health_interval: float = 10.0
    reset_timeout: float = 60.0
    close_timeout: float = 60.0
    budget: MachineBudget | None = attrs.field(factory=MachineBudget)
    start_backoff_cap: float = 30.0

    def __attrs_post_init__(self) -> None:
        if not _NAME.match(self.name) or HOST_ID_SEPARATOR in self.name:
            raise ConfigError(
                f"pool name {self.name!r} must be letters, digits, '_', '.', single '-'"
            )
        if self.slots_per_host < 1:
            raise ConfigError("slots_per_host must be >= 1")
        if not 0 <= self.min_hosts <= self.max_hosts or self.max_hosts < 1:
            raise ConfigError("need 0 <= min_hosts <= max_hosts and max_hosts >= 1")
        positive = ("idle_timeout", "acquire_timeout", "health_interval", "reset_timeout")
        for field in (*positive, "start_backoff_cap"):
            if getattr(self, field) <= 0:
                raise ConfigError(f"{field} must be positive")


class SandboxPool:
    """Hands out slots of hosts started by ``backend``; implements ``hermes_protocols.SlotPool``
    and ``ImageSlotPool``.

    Use it as ``async with SandboxPool(backend, PoolConfig(...)) as pool``. ``acquire`` returns
    the backend's slot object itself (so it also offers ``FileTransfer`` when the backend does).
    """

    def __init__(self, backend: HostBackend, config: PoolConfig | None = None) -> None:
        self.backend = backend
        self.config = config or PoolConfig()
        self._hosts: dict[str, _HostEntry] = {}
        self._leases: dict[str, tuple[str, int]] = {}
        self._starting = 0
        self._waiting = 0
        self._changed = anyio.Event()
        self._start_error: BaseException | None = None
        self._start_failures = 0
        self._next_start = 0.0
        self._retry_pending = False
        self._tg: TaskGroup | None = None
        self._closed = False
        self._acquires = 0
        self._waits: deque[float] = deque(maxlen=4096)
        self._wait_max = 0.0
        self._dedicated: dict[str, Host] = {}  # slot id -> the image host of its own
        self._image_room = anyio.Semaphore(self.config.max_hosts * self.config.slots_per_host)
        self.orphans_removed = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> SandboxPool:
        if self._tg is not None or self._closed:
            raise SandboxError("a SandboxPool can be entered only once")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            self._fit_budget()
            self.orphans_removed = await self.backend.sweep_orphans(self.config.name)
            if self.orphans_removed:
                logger.warning(
                    "pool %s: removed %d orphaned hosts of an earlier run",
                    self.config.name,
                    self.orphans_removed,
                )
            async with anyio.create_task_group() as starters:
                for _ in range(self.config.min_hosts):
                    self._launch(starters)
            error = self._start_error
            if len(self._hosts) < self.config.min_hosts and error is not None:
                if isinstance(error, SandboxError):
                    raise error
                raise SandboxError(f"could not start the minimum number of hosts: {error}")
            self._tg.start_soon(self._maintain)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def _fit_budget(self) -> None:
        budget = self.config.budget
        if budget is None or not isinstance(self.backend, MachineSlotsBackend):
            return
        slots = self.config.max_hosts * self.config.slots_per_host
        for note in self.backend.fit_budget(budget, slots):
            logger.warning("pool %s: clamped %s", self.config.name, note)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed = True
        self._notify()
        try:
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
        finally:
            with anyio.CancelScope(shield=True):
                hosts = [entry.host for entry in self._hosts.values()]
                hosts += self._dedicated.values()
                self._hosts.clear()
                self._leases.clear()
                self._dedicated.clear()
                async with anyio.create_task_group() as closers:
                    for host in hosts:
                        closers.start_soon(self._close_host, host)

    async def _close_host(self, host: Host) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.close_timeout):
            try:
                await host.close()
            except Exception:
                logger.exception("pool %s: closing host %s failed", self.config.name, host.host_id)

    # -- hosts -----------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _new_spec(self, slots: int | None = None) -> HostSpec:
        host_id = f"{self.config.name}{HOST_ID_SEPARATOR}{uuid.uuid4().hex[:12]}"
        return HostSpec(self.config.name, host_id, slots or self.config.slots_per_host)

    def _launch(self, group: TaskGroup) -> None:
        # Counted before the task runs, so concurrent acquires never start too many hosts.
        self._starting += 1
        group.start_soon(self._start_host)

    async def _start_host(self) -> None:
        try:
            host = await self.backend.start_host(self._new_spec())
        except Exception as exc:
            self._start_failed(exc)
            return
        finally:
            self._starting -= 1
            self._notify()
        if self._closed:
            await self._close_host(host)
            return
        self._hosts[host.host_id] = _HostEntry(host, list(range(self.config.slots_per_host)))
        self._start_error = None
        self._start_failures = 0
        self._next_start = 0.0
        self._notify()

    def _start_failed(self, exc: Exception) -> None:
        self._start_error = exc
        self._start_failures += 1
        delay = min(
            self.config.start_backoff_cap, _BACKOFF_BASE_S * 2 ** (self._start_failures - 1)
        )
        delay *= random.uniform(0.5, 1.0)  # jitter: pools failing together spread out
        self._next_start = time.monotonic() + delay
        # With no host running, the failure is the error of whoever waits for a slot; a
        # warning would say it twice. With hosts running, the pool goes on degraded: say so.
        logger.log(
            logging.WARNING if self._hosts else logging.DEBUG,
            "pool %s: starting a host failed (%d in a row; next try in %.1fs): %s",
            self.config.name,
            self._start_failures,
            delay,
            " ".join(str(exc).split()),
        )

    async def _retry_after_backoff(self) -> None:
        try:
            await anyio.sleep(max(0.0, self._next_start - time.monotonic()))
        finally:
            self._retry_pending = False
        self._maybe_grow()

    def _free_slots(self) -> int:
        return sum(len(entry.free) for entry in self._hosts.values())

    def _maybe_grow(self) -> None:
        if self._tg is None or self._closed:
            return
        if time.monotonic() < self._next_start:  # backing off after a failed start
            if not self._retry_pending and self._waiting:
                self._retry_pending = True
                self._tg.start_soon(self._retry_after_backoff)
            return
        pending = self._starting * self.config.slots_per_host
        missing = self._waiting - self._free_slots() - pending
        room = self.config.max_hosts - len(self._hosts) - self._starting
        for _ in range(min(room, math.ceil(max(missing, 0) / self.config.slots_per_host))):
            self._launch(self._tg)

    def _remove_host(self, host_id: str, why: str) -> None:
        entry = self._hosts.pop(host_id, None)
        if entry is None:
            return
        logger.info("pool %s: removing host %s (%s)", self.config.name, host_id, why)
        # Leases on the removed host stay recorded, so releasing them later is a quiet no-op.
        if self._tg is not None:
            self._tg.start_soon(self._close_host, entry.host)
        self._notify()

    async def _check_health(self, host_id: str, entry: _HostEntry) -> None:
        try:
            with anyio.fail_after(self.config.health_interval * 2 + 5):
                ok = await entry.host.healthy()
        except Exception:
            ok = False
        if not ok and self._hosts.get(host_id) is entry:
            self._remove_host(host_id, "failed its health check")

    async def _maintain(self) -> None:
        tick = min(self.config.health_interval, self.config.idle_timeout / 2)
        while True:
            await anyio.sleep(tick)
            async with anyio.create_task_group() as checks:
                for host_id, entry in list(self._hosts.items()):
                    checks.start_soon(self._check_health, host_id, entry)
            now = time.monotonic()
            for host_id, entry in list(self._hosts.items()):
                idle = not entry.leased and now - entry.idle_since > self.config.idle_timeout
                if idle and len(self._hosts) + self._starting > self.config.min_hosts:
                    self._remove_host(host_id, "idle")
            if time.monotonic() >= self._next_start:
                for _ in range(self.config.min_hosts - len(self._hosts) - self._starting):
                    assert self._tg is not None
                    self._launch(self._tg)
            self._maybe_grow()

    # -- acquire / release -----------------------------------------------------------------

    def _take(self, trajectory_id: str) -> Slot | None:
        for host_id, entry in self._hosts.items():
            if entry.free:
                index = entry.free.pop()
                entry.leased[index] = trajectory_id
                slot = entry.host.slot(index)
                self._leases[slot.slot_id] = (host_id, index)
                return slot
        return None

    def _describe(self) -> str:
        c = self.config
        return (
            f"pool {c.name!r}: {len(self._hosts)}/{c.max_hosts} hosts x {c.slots_per_host} "
            f"slots, {len(self._leases)} busy, {self._starting} starting"
        )

    async def acquire(self, trajectory_id: str, *, timeout: float | None = None) -> Slot:
        """A free slot for ``trajectory_id``; raises ``AcquireTimeout`` after ``timeout`` s."""
        limit = self.config.acquire_timeout if timeout is None else timeout
        started = time.monotonic()
        self._waiting += 1
        try:
            with anyio.move_on_after(limit):
                while True:
                    if self._closed or self._tg is None:
                        raise SandboxError(f"pool {self.config.name!r} is not running")
                    slot = self._take(trajectory_id)
                    if slot is not None:
                        self._record_wait(time.monotonic() - started)
                        return slot
                    error = self._start_error
                    if error is not None and not self._hosts and not self._starting:
                        self._start_error = None
                        if isinstance(error, SandboxError):
                            raise error
                        raise SandboxError(f"could not start a host: {error}") from error
                    changed = self._changed
                    self._maybe_grow()
                    await changed.wait()
        finally:
            self._waiting -= 1
        error = self._start_error
        if error is not None:
            raise SandboxError(
                f"no slot became free within {limit:.1f}s for trajectory {trajectory_id!r}: "
                f"starting a host failed {self._start_failures} time(s) in a row, last: {error}"
            ) from error
        raise AcquireTimeout(
            f"no slot became free within {limit:.1f}s for trajectory {trajectory_id!r} "
            f"({self._describe()}); raise max_hosts or the acquire timeout, or release slots"
        )

    @property
    def runs_images(self) -> bool:
        """Whether :meth:`acquire_image` works: the backend starts hosts of a given image."""
        return isinstance(self.backend, ImageHostBackend)

    async def acquire_image(
        self, trajectory_id: str, image: SlotImage, *, timeout: float | None = None
    ) -> Slot:
        """A slot on a host of its own running ``image``; waits at most ``timeout`` s for room,
        then starts the host (the image is pulled or built first, within the backend's own
        timeouts). ``release`` removes the host. Raises ``ImageUnavailable`` naming the image
        when it cannot be had."""
        backend = self.backend
        if not isinstance(backend, ImageHostBackend):
            raise ConfigError(
                f"the {backend.name} sandbox runs no container images, but trajectory "
                f"{trajectory_id!r} needs {image.name or 'an image built from its context'}; "
                "choose a container sandbox (docker)"
            )
        self._check_running()
        limit = self.config.acquire_timeout if timeout is None else timeout
        started = time.monotonic()
        with anyio.move_on_after(limit) as waited:
            await self._image_room.acquire()
        if waited.cancelled_caught:
            raise AcquireTimeout(
                f"no room for an image host within {limit:.1f}s for trajectory "
                f"{trajectory_id!r} ({len(self._dedicated)} image hosts running); raise "
                "max_hosts or the acquire timeout"
            )
        try:
            host = await backend.start_image_host(self._new_spec(slots=1), image)
        except BaseException:
            self._image_room.release()
            raise
        try:
            self._check_running()
        except SandboxError:
            await self._close_host(host)
            self._image_room.release()
            raise
        slot = host.slot(0)
        self._dedicated[slot.slot_id] = host
        self._record_wait(time.monotonic() - started)
        return slot

    def _check_running(self) -> None:
        if self._closed or self._tg is None:
            raise SandboxError(f"pool {self.config.name!r} is not running")

    def _record_wait(self, wait: float) -> None:
        self._acquires += 1
        self._waits.append(wait)
        self._wait_max = max(self._wait_max, wait)

    async def release(self, slot: Slot, *, reset: bool = True) -> None:
        """Give ``slot`` back; its workspace is emptied first unless reset is off (a slot of
        :meth:`acquire_image` is removed with its host)."""
        dedicated = self._dedicated.pop(slot.slot_id, None)
        if dedicated is not None:
            await self._close_host(dedicated)
            self._image_room.release()
            return
        lease = self._leases.pop(slot.slot_id, None)
        if lease is None:
            if self._closed:
                return
            raise SandboxError(f"slot {slot.slot_id!r} is not leased from {self._describe()}")
        host_id, index = lease
        entry = self._hosts.get(host_id)
        if entry is None:
            return
        if reset and self.config.reset_on_release:
            ok = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.reset_timeout):
                try:
                    await entry.host.reset_slot(index)
                    ok = True
                except Exception:
                    logger.exception(
                        "pool %s: resetting slot %s failed", self.config.name, slot.slot_id
                    )
            if not ok:
                entry.leased.pop(index, None)
                if self._hosts.get(host_id) is entry:
                    self._remove_host(host_id, "slot reset failed")
                return
        entry.leased.pop(index, None)
        if self._hosts.get(host_id) is entry:
            entry.free.append(index)
            if not entry.leased:
                entry.idle_since = time.monotonic()
            self._notify()

    def stats(self) -> PoolStats:
        total = len(self._hosts) * self.config.slots_per_host + len(self._dedicated)
        free = self._free_slots()
        return PoolStats(
            hosts=len(self._hosts) + len(self._dedicated),
            slots_total=total,
            slots_free=free,
            slots_busy=total - free,
            acquires=self._acquires,
            acquire_wait_p50_s=statistics.median(self._waits) if self._waits else 0.0,
            acquire_wait_max_s=self._wait_max,
        )
