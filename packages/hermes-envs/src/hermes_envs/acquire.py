"""An item's slot: one of the pool's, or one running the item's own image when it brings one
(``ImageEnvironment.image_for``) and the pool runs images (``ImageSlotPool``)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from hermes_protocols import (
    ConfigError,
    Environment,
    ImageEnvironment,
    ImageSlotPool,
    Item,
    Slot,
    SlotPool,
)


class SlotUnavailable(Exception):
    """The item's slot could not be had (no image, an image that cannot be had, no slot in
    time): an infrastructure failure of that item. The message says why, in one line."""


def for_pool(env: Environment, pool: SlotPool) -> Environment:
    """``env`` set up for ``pool``: an environment whose items may bring their own image learns
    whether the pool runs images (``ImageEnvironment.for_sandbox``)."""
    if not isinstance(env, ImageEnvironment):
        return env
    runs_images = isinstance(pool, ImageSlotPool) and pool.runs_images
    return env.for_sandbox(runs_images=runs_images)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def acquire_slot(
    env: Environment, pool: SlotPool, item: Item, trajectory_id: str, *, timeout: float
) -> Slot:
    """The slot ``item`` runs in, waiting at most ``timeout`` s.

    Raises :class:`SlotUnavailable` for what fails this item and ``ConfigError`` when the
    item brings an image and ``pool`` cannot run images at all (a wiring mistake)."""
    try:
        image = env.image_for(item) if isinstance(env, ImageEnvironment) else None
    except Exception as exc:
        raise SlotUnavailable(_describe(exc)) from exc
    acquire: Callable[..., Awaitable[Slot]]
    if image is None:
        acquire = functools.partial(pool.acquire, trajectory_id)
    elif isinstance(pool, ImageSlotPool):
        acquire = functools.partial(pool.acquire_image, trajectory_id, image)
    else:
        raise ConfigError(
            f"{env.name}: item {item.id!r} runs in its own image, which this slot pool cannot "
            "start; use a sandbox pool that runs images (docker)"
        )
    try:
        return await acquire(timeout=timeout)
    except Exception as exc:
        raise SlotUnavailable(_describe(exc)) from exc
