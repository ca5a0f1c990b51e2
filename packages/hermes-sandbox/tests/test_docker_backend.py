"""The docker backend: command lines offline; a real container where a daemon answers."""

from __future__ import annotations

import anyio
import pytest
from hermes_protocols import SandboxError
from hermes_sandbox import HostSpec
from hermes_sandbox.backends.docker import (
    HOST_LABEL,
    POOL_LABEL,
    DockerBackend,
    DockerConfig,
    docker_available,
    run_argv,
)

SPEC = HostSpec(pool_name="dk", host_id="dk--h0", slots=2)


def _no_daemon() -> str | None:
    return anyio.run(docker_available)


NO_DAEMON = _no_daemon()


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
@pytest.mark.skipif(NO_DAEMON is None, reason="a Docker daemon is reachable here")
async def test_without_a_daemon_start_fails_with_the_reason() -> None:
    with anyio.fail_after(30), pytest.raises(SandboxError, match="Docker daemon"):
        await DockerBackend().start_host(SPEC)
    assert await DockerBackend().sweep_orphans("dk") == 0


@pytest.mark.anyio
@pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
async def test_live_container() -> None:
    backend = DockerBackend(DockerConfig(image="python:3.12-slim"))
    await backend.sweep_orphans("dk")
    host = await backend.start_host(SPEC)
    try:
        slot = host.slot(0)
        result = await slot.exec("echo hi; pwd", timeout=30)
        assert result.stdout == f"hi\n{slot.workspace}\n"
        assert (await slot.exec("sleep 10", timeout=0.5)).timed_out
        await slot.write_file("a/b", b"\x00\xff")
        assert await slot.read_file("a/b") == b"\x00\xff"
        offline = await slot.exec(
            "python -c \"import urllib.request as u; u.urlopen('http://1.1.1.1', timeout=3)\"",
            timeout=30,
        )
        assert not offline.ok
        await host.reset_slot(0)
        with pytest.raises(FileNotFoundError):
            await slot.read_file("a/b")
    finally:
        await host.close()
    assert await backend.sweep_orphans("dk") == 0
