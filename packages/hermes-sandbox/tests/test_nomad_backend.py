"""The nomad backend end to end: fake Nomad API on loopback, real sandbox servers as allocations."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from hermes_protocols import SandboxError
from hermes_sandbox import HostSpec, PoolConfig, SandboxPool
from hermes_sandbox.backends.nomad import (
    NomadBackend,
    NomadConfig,
    NomadError,
    NomadImagePullError,
    alloc_index,
    job_payload,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ACL = "nomad-acl-token"
SERVE = str(Path(sys.executable).with_name("hermes-sandbox"))


def _load_fake() -> ModuleType:
    path = Path(__file__).with_name("test_nomad_fake_api.py")
    spec = importlib.util.spec_from_file_location("hermes_nomad_fake_api", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FAKE = _load_fake()


@pytest.fixture
async def nomad(sandbox_root: Path) -> AsyncIterator[tuple[Any, str]]:
    fake = _FAKE.FakeNomad(sandbox_root / "nomad", acl_token=ACL)
    async with fake.serve() as url:
        yield fake, url
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(sandbox_root / "nomad", True))


def _config(url: str, **kwargs: Any) -> NomadConfig:
    fields: dict[str, Any] = {
        "address": url,
        "token": ACL,
        "driver": "raw_exec",
        "command": SERVE,
        "poll_interval_s": 0.1,
        "start_timeout_s": 60.0,
    }
    fields.update(kwargs)
    return NomadConfig(**fields)


def _spec(i: int, slots: int = 2, pool: str = "np") -> HostSpec:
    return HostSpec(pool_name=pool, host_id=f"{pool}--h{i}", slots=slots)


async def test_hosts_are_allocations_scaled_through_the_job(nomad: tuple[Any, str]) -> None:
    fake, url = nomad
    backend = NomadBackend(_config(url))
    hosts: dict[int, Any] = {}

    async def start(i: int) -> None:
        hosts[i] = await backend.start_host(_spec(i))

    try:
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(start, i)
        job = fake.jobs["hermes-sandbox-np"]
        task = job["TaskGroups"][0]["Tasks"][0]
        assert task["Driver"] == "raw_exec"
        assert task["Env"]["HERMES_SANDBOX_TOKEN"] == backend.server_token
        assert job["Meta"] == {"hermes-pool": "np"}
        assert [r["Count"] for r in fake.scale_requests] == [2, 3]
        assert fake.running_processes() == 3
        urls = {h.url for h in hosts.values()}
        assert len(urls) == 3  # three distinct servers
        for i, host in hosts.items():
            slot = host.slot(1)
            result = await slot.exec(f"echo host{i} > f; cat f; pwd", timeout=20)
            assert result.stdout == f"host{i}\n/workspace\n"
            await slot.write_file("bin", bytes(range(256)))
            assert await slot.read_file("bin") == bytes(range(256))
        # Closing a host below the top index retires it: no scale-down, and it is reused.
        # (Pick allocation [0] by its port: ports are random, so URL order says nothing.)
        index_by_url = {
            f"http://127.0.0.1:{a['AllocatedResources']['Shared']['Ports'][0]['Value']}": (
                alloc_index(a)
            )
            for a in fake.allocs.values()
            if a["DesiredStatus"] == "run"
        }
        victim = next(i for i, h in hosts.items() if index_by_url[h.url] == 0)
        await hosts.pop(victim).close()
        scales_before = len(fake.scale_requests)
        reused = await backend.start_host(_spec(9))
        hosts[9] = reused
        assert len(fake.scale_requests) == scales_before
        assert (await reused.slot(1).exec("ls -A", timeout=20)).stdout == ""  # was reset
        assert await reused.healthy()
    finally:
        with anyio.CancelScope(shield=True):
            for host in hosts.values():
                await host.close()
    assert fake.jobs == {}  # last host closed: job stopped and purged
    assert fake.running_processes() == 0
    await backend.aclose()


async def test_image_pull_failure_fails_fast(nomad: tuple[Any, str]) -> None:
    fake, url = nomad
    backend = NomadBackend(_config(url, driver="docker", image="registry.example/none:1"))
    with anyio.fail_after(10), pytest.raises(NomadImagePullError, match="Failed to pull"):
        await backend.start_host(_spec(0))
    assert fake.jobs == {}  # given back: nothing left running on the cluster
    await backend.aclose()


async def test_acl_token_is_sent_and_refusals_are_explained(nomad: tuple[Any, str]) -> None:
    _, url = nomad
    backend = NomadBackend(_config(url, token="wrong"))
    with pytest.raises(NomadError, match="X-Nomad-Token"):
        await backend.start_host(_spec(0))
    await backend.aclose()


async def test_sweep_purges_a_job_left_by_a_killed_run(nomad: tuple[Any, str]) -> None:
    fake, url = nomad
    killed_run = NomadBackend(_config(url))
    host = await killed_run.start_host(_spec(0, slots=1, pool="orph"))
    fresh = NomadBackend(_config(url))
    assert await fresh.sweep_orphans("other") == 0
    assert await fresh.sweep_orphans("orph") == 1
    assert fake.jobs == {}
    assert fake.running_processes() == 0
    assert not await host.healthy()
    await fresh.aclose()
    await killed_run.aclose()


async def test_unreachable_nomad_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = NomadBackend(_config(f"http://127.0.0.1:{port}"))
    with anyio.fail_after(10), pytest.raises(SandboxError, match="unreachable"):
        await backend.start_host(_spec(0))
    await backend.aclose()


def test_docker_job_payload() -> None:
    config = NomadConfig(image="ghcr.io/acme/hermes-sandbox:1", cpu_mhz=2000, memory_mb=4096)
    job = job_payload(config, "hermes-sandbox-p", "p", 8, "tok")["Job"]
    task = job["TaskGroups"][0]["Tasks"][0]
    assert task["Config"]["image"] == "ghcr.io/acme/hermes-sandbox:1"
    assert task["Config"]["ports"] == ["http"]
    assert "--slots" in task["Config"]["args"]
    assert task["Config"]["args"][task["Config"]["args"].index("--slots") + 1] == "8"
    assert "${NOMAD_PORT_http}" in task["Config"]["args"]
    assert task["Resources"] == {"CPU": 2000, "MemoryMB": 4096}
    assert job["TaskGroups"][0]["RestartPolicy"]["Attempts"] == 0
    with pytest.raises(ValueError, match="image"):
        NomadConfig(driver="docker")


async def test_fake_lends_prewarmed_processes_and_takes_them_back(
    nomad: tuple[Any, str],
) -> None:
    """The conformance suite's process recycling: only prewarmed, only for identical tasks."""
    fake, url = nomad
    config = _config(url, server_token="prewarm-server-token", poll_interval_s=0.05)
    task = job_payload(config, "j", "p", 1, "prewarm-server-token")["Job"]["TaskGroups"][0]
    await fake.prewarm(task["Tasks"][0], 1)
    backend = NomadBackend(config)
    try:
        for round_ in range(2):
            pool_config = PoolConfig(name=f"warm{round_}", slots_per_host=1, max_hosts=1)
            async with SandboxPool(backend, pool_config) as pool:
                slot = await pool.acquire("t")
                assert (await slot.exec("echo hi > f; cat f", timeout=20)).stdout == "hi\n"
                await pool.release(slot)
            assert fake.live_allocations() == []
            assert fake.running_processes() == 0
        assert fake.reused == 2
        # Another slot count is another task: a fresh process, stopped with its allocation.
        async with SandboxPool(backend, PoolConfig(name="cold", slots_per_host=2)) as pool:
            slot = await pool.acquire("t")
            assert fake.running_processes() == 1
            await pool.release(slot)
        assert fake.reused == 2
        assert fake.running_processes() == 0
    finally:
        await backend.aclose()
