"""SandboxPool.acquire_image: a host of its own per slot, removed on release, bounded in number.

The accounting runs on a local backend that records each image request and starts a one-slot
local host for it; real images on real containers are in ``test_docker_images.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_protocols import AcquireTimeout, ConfigError, ImageSlotPool, SlotImage, SlotPool
from hermes_sandbox import HostSpec, LocalBackend, LocalConfig, PoolConfig, SandboxPool
from hermes_sandbox.backends.base import Host, ImageHostBackend

pytestmark = pytest.mark.anyio
IMAGE = SlotImage(name="task:1", workdir="/app")


class _RecordingImageBackend(LocalBackend):
    """A local backend whose hosts stand for images: it records every request."""

    def __init__(self, root: Path) -> None:
        super().__init__(LocalConfig(root_dir=str(root)))
        self.requests: list[tuple[HostSpec, SlotImage]] = []

    async def start_image_host(self, spec: HostSpec, image: SlotImage) -> Host:
        self.requests.append((spec, image))
        return await self.start_host(spec)


async def test_each_image_slot_is_a_host_of_its_own_removed_on_release(
    sandbox_root: Path,
) -> None:
    backend = _RecordingImageBackend(sandbox_root)
    assert isinstance(backend, ImageHostBackend)
    config = PoolConfig(name="img", slots_per_host=2, max_hosts=1)
    async with SandboxPool(backend, config) as pool:
        assert isinstance(pool, SlotPool)
        assert isinstance(pool, ImageSlotPool)
        assert pool.runs_images
        first = await pool.acquire_image("a", IMAGE)
        await pool.acquire_image("b", IMAGE)
        assert [(spec.slots, image) for spec, image in backend.requests] == [(1, IMAGE)] * 2
        assert len({spec.host_id for spec, _ in backend.requests}) == 2
        assert (pool.stats().hosts, pool.stats().slots_busy) == (2, 2)
        await first.write_file("left.txt", b"from a")
        with pytest.raises(AcquireTimeout, match="image host"):
            await pool.acquire_image("c", IMAGE, timeout=0.2)  # 1 host x 2 slots of room
        await pool.release(first)
        assert (pool.stats().hosts, pool.stats().slots_busy) == (1, 1)
        third = await pool.acquire_image("c", IMAGE, timeout=5)
        listing = await third.exec("ls", timeout=10)
        assert listing.stdout == ""  # a new host: nothing of the first trajectory
        generic = await pool.acquire("generic")  # image hosts leave the pool's own hosts be
        await pool.release(generic)
    # leaving the pool removes the image hosts still held (sandbox_root checks the rest)


async def test_a_backend_without_images_refuses_an_image_slot(sandbox_root: Path) -> None:
    backend = LocalBackend(LocalConfig(root_dir=str(sandbox_root)))
    async with SandboxPool(backend, PoolConfig(name="noimg")) as pool:
        assert not pool.runs_images
        with pytest.raises(ConfigError, match=r"local sandbox runs no container images.*docker"):
            await pool.acquire_image("t", IMAGE)


def test_a_slot_image_is_a_name_or_a_build_context() -> None:
    built = SlotImage(build_context={"b": b"2", "Dockerfile": b"FROM x\n"}, workdir="/app")
    assert built.build_context == (("Dockerfile", b"FROM x\n"), ("b", b"2"))
    assert built == SlotImage(
        build_context=[("b", b"2"), ("Dockerfile", b"FROM x\n")], workdir="/app"
    )
    with pytest.raises(ValueError, match="either a name or a build context"):
        SlotImage()
    with pytest.raises(ValueError, match="either a name or a build context"):
        SlotImage(name="x", build_context={"Dockerfile": b""})
    with pytest.raises(ValueError, match="Dockerfile"):
        SlotImage(build_context={"a": b""})
    with pytest.raises(ValueError, match="absolute"):
        SlotImage(name="x", workdir="app")
