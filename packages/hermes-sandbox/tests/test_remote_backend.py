"""The ``remote`` backend against real sandbox servers (bwrap inside) on loopback."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hermes_protocols import FileTransfer, SandboxError, SandboxTimeout, WorkspaceEscape
from hermes_sandbox import BwrapBackend, BwrapConfig, HostSpec, LocalBackend, LocalConfig
from hermes_sandbox.backends.remote import (
    RemoteBackend,
    RemoteConfig,
    RemoteHost,
    RemoteTimeouts,
)
from hermes_sandbox.server import ServerConfig, running_server

pytestmark = pytest.mark.anyio
TOKEN = "remote-test-token"


@pytest.fixture
async def server_url(sandbox_root: Path) -> AsyncIterator[str]:
    data = sandbox_root / "srv"
    backend = BwrapBackend(BwrapConfig(root_dir=str(data / "hosts")))
    config = ServerConfig(slots=3, data_dir=str(data), token=TOKEN)
    async with running_server(config, backend) as url:
        yield url
    await anyio.to_thread.run_sync(_rmtree, data)


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _spec(slots: int = 2) -> HostSpec:
    return HostSpec(pool_name="rt", host_id="rt--h0", slots=slots)


async def test_slots_exec_and_stream_files(server_url: str, tmp_path: Path) -> None:
    backend = RemoteBackend(RemoteConfig(urls=[server_url], token=TOKEN))
    host = await backend.start_host(_spec())
    try:
        slot = host.slot(1)
        assert isinstance(slot, FileTransfer)
        result = await slot.exec("cat; echo $V; pwd", timeout=10, stdin=b"in\n", env={"V": "v"})
        assert result.stdout == "in\nv\n/workspace\n"
        timed = await slot.exec("sleep 20", timeout=0.5)
        assert timed.timed_out
        assert timed.exit_code == 124
        await slot.write_file("x/y.bin", b"\x00\x01\xff")
        assert await slot.read_file("x/y.bin") == b"\x00\x01\xff"
        with pytest.raises(FileNotFoundError):
            await slot.read_file("missing")
        with pytest.raises(IsADirectoryError):
            await slot.read_file("x")
        with pytest.raises(WorkspaceEscape):
            await slot.write_file("../../escape", b"")
        big = tmp_path / "big"
        big.write_bytes(os.urandom(6 << 20))
        await slot.upload(str(big), "big")
        await slot.download("big", str(tmp_path / "back"))
        assert (tmp_path / "back").read_bytes() == big.read_bytes()
        assert isinstance(host, RemoteHost)
        results = await host.exec_batch(
            [
                {"slot": 0, "command": "echo zero", "timeout": 10},
                {"slot": 1, "command": "ls big", "timeout": 10},
            ]
        )
        assert [r.stdout for r in results if not isinstance(r, Exception)] == ["zero\n", "big\n"]
        name = await host.slot(1).archive(name="one.tar.gz")  # type: ignore[attr-defined]
        await host.client.download_artifact(name, str(tmp_path / "one.tar.gz"))
        assert (tmp_path / "one.tar.gz").read_bytes()[:2] == b"\x1f\x8b"
        await host.client.delete_artifact(name)
        await host.reset_slot(1)
        assert (await slot.exec("ls -A", timeout=10)).stdout == ""
        assert await host.healthy()
    finally:
        await host.close()
    assert not await host.healthy()


async def test_one_host_per_server_and_release_on_close(server_url: str) -> None:
    backend = RemoteBackend(RemoteConfig(urls=[server_url], token=TOKEN))
    host = await backend.start_host(_spec())
    await host.slot(0).write_file("left", b"x")
    with pytest.raises(SandboxError, match="in use"):
        await backend.start_host(_spec())
    await host.close()
    again = await backend.start_host(_spec())
    try:  # closing reset the slots
        assert (await again.slot(0).exec("ls -A", timeout=10)).stdout == ""
    finally:
        await again.close()


async def test_sweep_resets_servers_not_in_use(server_url: str) -> None:
    config = RemoteConfig(urls=[server_url], token=TOKEN)
    host = await RemoteBackend(config).start_host(_spec())
    await host.slot(0).write_file("orphan", b"x")
    # A new run (new backend object) finds the server not in use by it and resets it.
    assert await RemoteBackend(config).sweep_orphans("rt") == 1
    with pytest.raises(FileNotFoundError):
        await host.slot(0).read_file("orphan")
    await host.close()


async def test_wrong_token_and_too_few_slots_fail_at_start(server_url: str) -> None:
    wrong = RemoteBackend(RemoteConfig(urls=[server_url], token="not-the-token"))
    with pytest.raises(SandboxError, match="token"):
        await wrong.start_host(_spec())
    backend = RemoteBackend(RemoteConfig(urls=[server_url], token=TOKEN))
    with pytest.raises(SandboxError, match="has 3 slots"):
        await backend.start_host(_spec(slots=4))
    host = await backend.start_host(_spec())  # failures released the server
    await host.close()


async def test_unreachable_and_silent_servers() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    dead = RemoteBackend(RemoteConfig(urls=[f"http://127.0.0.1:{port}"], token=TOKEN))
    with anyio.fail_after(10), pytest.raises(SandboxError, match="unreachable"):
        await dead.start_host(_spec())
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        timeouts = RemoteTimeouts(health=0.5)
        backend = RemoteBackend(RemoteConfig(urls=[url], token=TOKEN, timeouts=timeouts))
        with anyio.fail_after(10), pytest.raises(SandboxTimeout):
            await backend.start_host(_spec())


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="at least one"):
        RemoteConfig(urls=[], token=TOKEN)
    with pytest.raises(ValueError, match="http"):
        RemoteConfig(urls=["localhost:8000"], token=TOKEN)


async def test_workspace_is_what_commands_see(sandbox_root: Path) -> None:
    # A local-backend server: workspaces are host paths, and the remote slot reports them.
    data = sandbox_root / "local-srv"
    backend = LocalBackend(LocalConfig(root_dir=str(data / "hosts")))
    config = ServerConfig(slots=2, data_dir=str(data), token=TOKEN)
    try:
        async with running_server(config, backend) as url:
            host = await RemoteBackend(RemoteConfig(urls=[url], token=TOKEN)).start_host(_spec())
            try:
                for i in range(2):
                    slot = host.slot(i)
                    pwd = await slot.exec("pwd", timeout=10)
                    assert pwd.stdout.strip() == slot.workspace
                assert host.slot(0).workspace != host.slot(1).workspace
            finally:
                await host.close()
    finally:
        await anyio.to_thread.run_sync(_rmtree, data)


async def test_requests_do_not_wait_for_delayed_acks(server_url: str) -> None:
    # Without TCP_NODELAY on the server socket every answer waits ~40 ms (Nagle + delayed ACK).
    host = await RemoteBackend(RemoteConfig(urls=[server_url], token=TOKEN)).start_host(_spec())
    try:
        assert isinstance(host, RemoteHost)
        times = []
        for _ in range(10):
            started = anyio.current_time()
            await host.client.slots()
            times.append(anyio.current_time() - started)
        assert min(times) < 0.03, times
    finally:
        await host.close()
