"""The docker backend: command lines offline; a real container where a daemon answers."""

from __future__ import annotations

import signal
import subprocess
import sys

import anyio
import pytest
from hermes_protocols import SandboxError
from hermes_sandbox import HostSpec, PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import (
    HOST_LABEL,
    POOL_LABEL,
    DockerBackend,
    DockerConfig,
    docker_available,
    run_argv,
)
from hermes_sandbox.file_window import FileTooLarge

SPEC = HostSpec(pool_name="dk", host_id="dk--h0", slots=2)


BASE_IMAGE = "hermes-sandbox-base:bookworm-minbase"
"""Built offline by ``.ci/docker.sh`` (debootstrap --variant=minbase + docker import)."""


def _no_daemon() -> str | None:
    reason = anyio.run(docker_available)
    if reason is not None:
        return reason
    found = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True)
    if found.returncode != 0:
        return f"image {BASE_IMAGE} is missing; run .ci/docker.sh to build it offline"
    return None


NO_DAEMON = _no_daemon()


def _containers(pool_name: str) -> list[str]:
    listing = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={POOL_LABEL}={pool_name}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listing.stdout.split()


def test_run_argv_isolates_limits_and_labels() -> None:
    argv = run_argv(DockerConfig(image="img:1", memory_mb=512, cpus=0.5, pids_limit=64), SPEC)
    joined = " ".join(argv)
    assert argv[:3] == ["docker", "run", "-d"]
    assert f"--label {POOL_LABEL}=dk" in joined
    assert f"--label {HOST_LABEL}=dk--h0" in joined
    assert "--network none" in joined
    assert "--memory 512m" in joined
    assert "--cpus 0.5" in joined
    assert "--pids-limit 64" in joined
    assert "--cap-drop ALL" in joined
    assert argv[-3:] == ["img:1", "sleep", "infinity"]
    networked = run_argv(DockerConfig(allow_network=True), SPEC)
    assert "--network" not in networked


@pytest.mark.anyio
@pytest.mark.skipif(anyio.run(docker_available) is None, reason="a Docker daemon is reachable here")
async def test_without_a_daemon_start_fails_with_the_reason() -> None:
    with anyio.fail_after(30), pytest.raises(SandboxError, match="Docker daemon"):
        await DockerBackend().start_host(SPEC)
    assert await DockerBackend().sweep_orphans("dk") == 0


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_live_container() -> None:
    backend = DockerBackend(DockerConfig(image=BASE_IMAGE))
    await backend.sweep_orphans("dk")
    host = await backend.start_host(SPEC)
    try:
        slot = host.slot(0)
        result = await slot.exec("echo hi; pwd", timeout=30)
        assert result.stdout == f"hi\n{slot.workspace}\n"
        assert (await slot.exec("sleep 10", timeout=0.5)).timed_out
        await slot.write_file("a/b", b"\x00\xff")
        assert await slot.read_file("a/b") == b"\x00\xff"
        offline = await slot.exec("timeout 3 bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'", timeout=30)
        assert not offline.ok
        await host.reset_slot(0)
        with pytest.raises(FileNotFoundError):
            await slot.read_file("a/b")
    finally:
        await host.close()
    assert await backend.sweep_orphans("dk") == 0
    assert _containers("dk") == []


_KILLED_POOL = """
import anyio, sys
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import DockerBackend, DockerConfig

async def main():
    backend = DockerBackend(DockerConfig(image=sys.argv[1]))
    async with SandboxPool(backend, PoolConfig(name="dk-orphan", min_hosts=1)) as pool:
        slot = await pool.acquire("t")
        await slot.exec("true", timeout=30)
        print("ready", flush=True)
        await anyio.sleep(120)

anyio.run(main)
"""


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_orphan_sweep_after_the_pool_process_was_killed() -> None:
    child = await anyio.open_process([sys.executable, "-c", _KILLED_POOL, BASE_IMAGE], stderr=None)
    try:
        assert child.stdout is not None
        with anyio.fail_after(120):
            line = await child.stdout.receive()
        assert line.startswith(b"ready")
    finally:
        child.send_signal(signal.SIGKILL)
        with anyio.fail_after(10):
            await child.wait()
        await child.aclose()
    left = await anyio.to_thread.run_sync(_containers, "dk-orphan")
    assert len(left) == 1  # the killed run's container is still there
    backend = DockerBackend(DockerConfig(image=BASE_IMAGE))
    async with SandboxPool(backend, PoolConfig(name="dk-orphan")) as pool:
        assert pool.orphans_removed == 1
    assert await anyio.to_thread.run_sync(_containers, "dk-orphan") == []


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_bounded_reads_and_cleanup_of_pools() -> None:
    backend = DockerBackend(DockerConfig(image=BASE_IMAGE, max_read_bytes=1 << 20))
    async with SandboxPool(backend, PoolConfig(name="dk-clean", slots_per_host=2)) as pool:
        slot = await pool.acquire("t")
        assert (await slot.exec("truncate -s 2G big", timeout=30)).ok
        with pytest.raises(FileTooLarge, match=r"2048\.0 MiB"):
            await slot.read_file("big")
        assert len(await anyio.to_thread.run_sync(_containers, "dk-clean")) == 1
        await pool.release(slot)
    assert await anyio.to_thread.run_sync(_containers, "dk-clean") == []
