"""The docker backend: command lines offline; a real container where a daemon answers."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hermes_protocols import SandboxError
from hermes_sandbox import HostSpec, PoolConfig, ResourceLimits, SandboxPool
from hermes_sandbox.backends._host_dirs import owner_token
from hermes_sandbox.backends.agent_host import SlotPaths
from hermes_sandbox.backends.docker import (
    HOST_LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    ROOT_LABEL,
    USER_LABEL,
    DockerBackend,
    DockerConfig,
    DockerSweeper,
    docker_available,
)
from hermes_sandbox.backends.docker_config import run_argv
from hermes_sandbox.budget import MachineBudget
from hermes_sandbox.cleanup import Removed
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
    """Names of the containers of pool ``pool_name``."""
    listing = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            f"label={POOL_LABEL}={pool_name}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return listing.stdout.split()


def _argv(
    config: DockerConfig, *, storage_opt: bool = False, limits: ResourceLimits | None = None
) -> list[str]:
    return run_argv(
        config,
        image=config.image,
        workspace=config.workspace,
        read_only=config.read_only_rootfs,
        name="dk--h0-0-abc",
        labels={POOL_LABEL: "dk", HOST_LABEL: "dk--h0"},
        user=(200123, 200123),
        paths=SlotPaths("/srv/dk--h0/slots/0", "/srv/dk--h0/ctl/0"),
        agent="/srv/.bin/hermes-exec-1234",
        limits=limits or config.limits,
        storage_opt=storage_opt,
    )


def test_run_argv_isolates_limits_and_labels() -> None:
    limits = ResourceLimits(slot_memory_bytes=512 << 20, slot_cpus=0.5, slot_processes=64)
    argv = _argv(DockerConfig(image="img:1", limits=limits))
    joined = " ".join(argv)
    assert argv[:5] == ["docker", "run", "-d", "--rm", "--name"]
    assert "--user 200123:200123" in joined
    assert f"--label {POOL_LABEL}=dk" in joined
    assert f"--label {HOST_LABEL}=dk--h0" in joined
    assert "--network none" in joined
    assert f"--memory {512 << 20} --memory-swap {512 << 20}" in joined
    assert "--cpus 0.5" in joined
    assert "--pids-limit 64" in joined
    assert "--cap-drop ALL --security-opt no-new-privileges" in joined
    assert "--read-only" in argv
    bind = "--mount type=bind,source=/srv/dk--h0/slots/0"
    assert f"{bind}/workspace,target=/workspace" in joined
    assert f"{bind}/tmp,target=/tmp" in joined
    assert f"{bind}/tmp,target=/var/tmp" in joined
    assert f"{bind}/shm,target=/dev/shm" in joined
    assert "source=/srv/dk--h0/ctl/0,target=/.hermes/ctl,readonly" in joined
    assert "source=/srv/.bin/hermes-exec-1234,target=/.hermes/exec,readonly" in joined
    assert argv[-3:] == ["img:1", "--connect", "/.hermes/ctl/s"]
    assert argv[argv.index("--entrypoint") + 1] == "/.hermes/exec"
    assert "--network" not in _argv(DockerConfig(allow_network=True))
    disk = ResourceLimits(disk_bytes=300 << 20)
    writable = _argv(DockerConfig(read_only_rootfs=False, limits=disk), storage_opt=True)
    assert "--read-only" not in writable
    assert f"--storage-opt size={300 << 20}" in " ".join(writable)
    assert "--storage-opt" not in _argv(DockerConfig(read_only_rootfs=False), storage_opt=False)


def test_slot_limits_are_fitted_to_the_machine() -> None:
    backend = DockerBackend(DockerConfig(limits=ResourceLimits(slot_cpus=8.0)))
    notes = backend.fit_budget(MachineBudget(memory_bytes=4 << 30, cpus=2), 8)
    assert backend.limits.slot_memory_bytes == (4 << 30) // 8
    assert backend.limits.slot_cpus == 2
    assert len(notes) >= 2
    argv = " ".join(_argv(backend.config, limits=backend.limits))
    assert f"--memory {(4 << 30) // 8} " in argv
    assert "--cpus 2 " in argv


def test_which_configurations_restore_in_place() -> None:
    assert DockerConfig().restores_in_place
    assert not DockerConfig(run_as_root=True).restores_in_place
    assert not DockerConfig(read_only_rootfs=False).restores_in_place
    assert not DockerConfig(fresh_container_on_reset=True).restores_in_place


@pytest.mark.anyio
@pytest.mark.skipif(anyio.run(docker_available) is None, reason="a Docker daemon is reachable here")
async def test_without_a_daemon_start_fails_with_the_reason() -> None:
    with anyio.fail_after(30), pytest.raises(SandboxError, match="Docker daemon"):
        await DockerBackend().start_host(SPEC)
    with anyio.fail_after(30), pytest.raises(SandboxError, match="Docker daemon"):
        await DockerBackend().sweep_orphans("dk")


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_live_container(sandbox_root: Path) -> None:
    backend = DockerBackend(DockerConfig(image=BASE_IMAGE, root_dir=str(sandbox_root)))
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
    backend = DockerBackend(DockerConfig(image=sys.argv[1], root_dir=sys.argv[2]))
    async with SandboxPool(backend, PoolConfig(name="dk-orphan", min_hosts=1)) as pool:
        slot = await pool.acquire("t")
        await slot.exec("true", timeout=30)
        print("ready", flush=True)
        await anyio.sleep(120)

anyio.run(main)
"""


def _plant(pool: str, owner: str, root: Path) -> str:
    """A container labelled as one of ``pool``'s under ``root``, owned by ``owner``; its name.
    A pool's start sweeps only its own root: other tests' pools never see it."""
    name = f"{pool}-planted-{owner.replace(':', '-')}-{root.name}"
    labels = [
        f"--label={POOL_LABEL}={pool}",
        f"--label={OWNER_LABEL}={owner}",
        f"--label={USER_LABEL}={os.geteuid()}",
        f"--label={ROOT_LABEL}={root}",
    ]
    argv = ["docker", "run", "-d", "--rm", "--name", name, "--network", "none", *labels]
    subprocess.run([*argv, BASE_IMAGE, "sleep", "600"], capture_output=True, check=True)
    return name


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_orphan_sweep_removes_only_what_dead_pools_left(sandbox_root: Path) -> None:
    argv = [sys.executable, "-c", _KILLED_POOL, BASE_IMAGE, str(sandbox_root)]
    child = await anyio.open_process(argv, stderr=None)
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
    plant = functools.partial(_plant, "dk-orphan", root=sandbox_root)
    dead = await anyio.to_thread.run_sync(plant, "1:0")  # pid 1 never started at tick 0
    live = await anyio.to_thread.run_sync(plant, owner_token())
    try:
        backend = DockerBackend(DockerConfig(image=BASE_IMAGE, root_dir=str(sandbox_root)))
        async with SandboxPool(backend, PoolConfig(name="dk-orphan")) as pool:
            assert pool.orphans_removed == 1  # the killed run's workspaces (and `dead`)
        left = await anyio.to_thread.run_sync(_containers, "dk-orphan")
        assert left == [live]
    finally:
        await anyio.run_process(["docker", "rm", "-f", dead, live], check=False)
    assert await anyio.to_thread.run_sync(_containers, "dk-orphan") == []


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_cleanup_command_removes_containers_of_dead_pools_only(sandbox_root: Path) -> None:
    plant = functools.partial(_plant, "dk-cleanup", root=sandbox_root)
    dead = await anyio.to_thread.run_sync(plant, "1:0")
    live = await anyio.to_thread.run_sync(plant, owner_token())
    try:
        command = [sys.executable, "-m", "hermes_sandbox.cli", "cleanup", "--dry-run"]
        listed = (await anyio.run_process(command)).stdout.decode()
        assert f"would remove container {dead}" in listed
        assert live not in listed
        removed = await DockerSweeper().sweep(dry_run=False)
        assert Removed("container", dead) in removed
        assert await anyio.to_thread.run_sync(_containers, "dk-cleanup") == [live]
    finally:
        await anyio.run_process(["docker", "rm", "-f", dead, live], check=False)


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
        assert len(await anyio.to_thread.run_sync(_containers, "dk-clean")) == 2  # one per slot
        await pool.release(slot)
    assert await anyio.to_thread.run_sync(_containers, "dk-clean") == []


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_health_checks_during_a_fresh_container_reset_keep_the_host() -> None:
    backend = DockerBackend(DockerConfig(image=BASE_IMAGE, fresh_container_on_reset=True))
    config = PoolConfig(name="dk-health", slots_per_host=1, max_hosts=1, health_interval=0.05)
    async with SandboxPool(backend, config) as pool:
        slot = await pool.acquire("t0")
        host = slot.slot_id.split("/")[0]
        for i in range(1, 4):
            await pool.release(slot)  # the container is replaced while checks run
            slot = await pool.acquire(f"t{i}")
            assert slot.slot_id.split("/")[0] == host, "the host was retired mid-reset"
            assert (await slot.exec("echo ok", timeout=30)).stdout == "ok\n"
        await pool.release(slot)
    assert await anyio.to_thread.run_sync(_containers, "dk-health") == []
