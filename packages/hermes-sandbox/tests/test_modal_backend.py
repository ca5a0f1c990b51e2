"""The modal backend against the signature-checked fake SDK, plus the live test."""

from __future__ import annotations

import importlib.util
import itertools
import os
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import modal.exception
import psutil
import pytest
from hermes_protocols import ConfigError, FileTransfer, SandboxError, Slot, WorkspaceEscape
from hermes_sandbox.backends.base import HostSpec
from hermes_sandbox.backends.modal import (
    HOST_TAG,
    POOL_TAG,
    ModalAuthError,
    ModalBackend,
    ModalConfig,
    ModalSDK,
)


def _load_fake() -> ModuleType:
    path = Path(__file__).with_name("test_modal_fake_sdk.py")
    spec = importlib.util.spec_from_file_location("hermes_modal_fake_sdk", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FAKE = _load_fake()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake() -> Any:
    return _FAKE.FakeModal()


def _config(tmp_path: Path, **kwargs: Any) -> ModalConfig:
    return ModalConfig(workspace_root=str(tmp_path / "ws"), **kwargs)


_RUN = uuid.uuid4().hex[:8]
"""This test process's part of every host id. The fake's sandboxes share this machine's
``/proc`` (a real one has its own), and the exec wrapper and the slot reset SIGKILL every
process carrying their slot's marker: two xdist workers using one slot id kill each other's
commands."""


def _spec(host: str = "p1-h0", slots: int = 2, pool: str = "p1") -> HostSpec:
    return HostSpec(pool_name=pool, host_id=f"{host}-{_RUN}", slots=slots)


@pytest.mark.anyio
async def test_create_passes_the_documented_options(tmp_path: Path, fake: Any) -> None:
    config = _config(
        tmp_path,
        cpu=2.0,
        memory_mb=4096,
        gpu="T4",
        secrets=("hf",),
        env={"A": "1"},
        idle_timeout_s=120,
        rollout_timeout_s=600,
        verification_timeout_s=120,
        lifetime_margin_s=60,
    )
    backend = ModalBackend(config, sdk=fake.sdk())
    spec = _spec()
    host = await backend.start_host(spec)
    try:
        kwargs = fake.created[0].create_kwargs
        assert kwargs["cpu"] == 2.0
        assert kwargs["memory"] == 4096
        assert kwargs["gpu"] == "T4"
        assert kwargs["timeout"] == 780  # rollout + verification + margin
        assert kwargs["idle_timeout"] == 120
        assert kwargs["secrets"] == [("secret", "hf")]
        assert kwargs["env"] == {"A": "1"}
        assert kwargs["block_network"] is True
        assert kwargs["image"] == ("registry", "python:3.12-slim")
        assert kwargs["tags"] == {POOL_TAG: "p1", HOST_TAG: spec.host_id}
        assert kwargs["app"].app_id == "ap-hermes-sandbox"
        assert (tmp_path / "ws" / "slot-0").is_dir()
        assert (tmp_path / "ws" / "slot-1").is_dir()
    finally:
        await host.close()
    assert fake.live == {}


@pytest.mark.anyio
async def test_dockerfile_image(tmp_path: Path, fake: Any) -> None:
    config = ModalConfig(
        workspace_root=str(tmp_path / "ws"), image=None, dockerfile="env/Dockerfile"
    )
    host = await ModalBackend(config, sdk=fake.sdk()).start_host(_spec())
    await host.close()
    assert fake.created[0].create_kwargs["image"] == ("dockerfile", "env/Dockerfile")


@pytest.mark.anyio
async def test_exec_files_and_reset(tmp_path: Path, fake: Any) -> None:
    host = await ModalBackend(_config(tmp_path), sdk=fake.sdk()).start_host(_spec())
    try:
        slot = host.slot(0)
        assert isinstance(slot, Slot)
        assert isinstance(slot, FileTransfer)
        result = await slot.exec("echo out; echo err >&2; pwd; exit 3", timeout=10)
        assert result.exit_code == 3
        assert result.stdout == f"out\n{slot.workspace}\n"
        assert result.stderr == "err\n"
        piped = await slot.exec("cat; echo $X", timeout=10, stdin=b"in\n", env={"X": "x"})
        assert piped.stdout == "in\nx\n"
        await slot.write_file("d/bin.dat", bytes(range(256)))
        assert await slot.read_file("d/bin.dat") == bytes(range(256))
        sub = await slot.exec("ls", timeout=10, cwd="d")
        assert sub.stdout == "bin.dat\n"
        with pytest.raises(FileNotFoundError):
            await slot.read_file("missing")
        with pytest.raises(IsADirectoryError):
            await slot.read_file("d")
        with pytest.raises(WorkspaceEscape):
            await slot.read_file("../slot-1/x")
        with pytest.raises(WorkspaceEscape):
            await slot.write_file("/etc/passwd", b"")
        local = tmp_path / "big.bin"
        local.write_bytes(os.urandom(3 << 20))
        await slot.upload(str(local), "big.bin")
        await slot.download("big.bin", str(tmp_path / "back.bin"))
        assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
        await host.reset_slot(0)
        assert [p async for p in anyio.Path(slot.workspace).iterdir()] == []
        assert await host.healthy()
    finally:
        await host.close()
    assert not await host.healthy()


@pytest.mark.anyio
async def test_timeout_kills_the_process_group(tmp_path: Path, fake: Any) -> None:
    host = await ModalBackend(_config(tmp_path), sdk=fake.sdk()).start_host(_spec())
    try:
        slot = host.slot(0)
        marker = Path(slot.workspace) / "survivor"
        result = await slot.exec(f"(sleep 1; touch {marker}) & sleep 30", timeout=0.5)
        assert result.timed_out
        assert result.exit_code == 124
        assert result.duration_s < 5
        await anyio.sleep(1.5)
        assert not marker.exists()
    finally:
        await host.close()


@pytest.mark.anyio
async def test_output_is_capped(tmp_path: Path, fake: Any) -> None:
    config = _config(tmp_path, max_output_bytes=1000)
    host = await ModalBackend(config, sdk=fake.sdk()).start_host(_spec())
    try:
        result = await host.slot(0).exec("head -c 100000 /dev/zero | tr '\\0' a", timeout=10)
        assert result.truncated
        assert "output truncated" in result.stdout
        assert len(result.stdout) < 1200
    finally:
        await host.close()


@pytest.mark.anyio
async def test_huge_output_is_streamed_not_buffered(tmp_path: Path, fake: Any) -> None:
    me = psutil.Process()
    peak = [me.memory_info().rss]
    stop = anyio.Event()

    async def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            await anyio.sleep(0.01)

    host = await ModalBackend(_config(tmp_path), sdk=fake.sdk()).start_host(_spec())
    try:
        before = me.memory_info().rss
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            result = await host.slot(0).exec("head -c 300000000 /dev/zero; echo END", timeout=120)
            stop.set()
        assert result.truncated
        assert result.stdout.endswith("END\n")
        grown = (peak[0] - before) >> 20
        assert grown < 100, f"RSS grew by {grown} MiB for 300 MB of output"
    finally:
        await host.close()


@pytest.mark.anyio
async def test_creation_rate_and_starting_cap(tmp_path: Path, fake: Any) -> None:
    config = _config(tmp_path, creations_per_second=10.0, max_starting=2)
    backend = ModalBackend(config, sdk=fake.sdk())
    hosts: list[Any] = []

    async def start(i: int) -> None:
        hosts.append(await backend.start_host(_spec(f"p1-h{i}", slots=1)))

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(start, i)
    for host in hosts:
        await host.close()
    times = sorted(fake.create_times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 5
    assert min(gaps) >= 0.09  # 10 per second


@pytest.mark.anyio
async def test_sweep_terminates_only_tagged_sandboxes(tmp_path: Path, fake: Any) -> None:
    backend = ModalBackend(_config(tmp_path), sdk=fake.sdk())
    mine = await backend.start_host(_spec("p1-h0", 1))
    other = await backend.start_host(_spec("p2-h0", 1, pool="p2"))
    try:
        assert await ModalBackend(_config(tmp_path), sdk=fake.sdk()).sweep_orphans("p1") == 1
        assert not await mine.healthy()
        assert await other.healthy()
    finally:
        await other.close()
        await mine.close()


@pytest.mark.anyio
async def test_failed_setup_terminates_the_sandbox(tmp_path: Path, fake: Any) -> None:
    (tmp_path / "ws").write_text("not a directory")  # mkdir of the workspaces fails
    backend = ModalBackend(_config(tmp_path), sdk=fake.sdk())
    with pytest.raises(SandboxError):
        await backend.start_host(_spec())
    assert fake.live == {}


def test_lifetime_must_outlive_rollout_and_verification() -> None:
    with pytest.raises(ConfigError, match="not longer than rollout"):
        ModalConfig(rollout_timeout_s=600, verification_timeout_s=300, sandbox_timeout_s=900)
    assert ModalConfig(rollout_timeout_s=600, verification_timeout_s=300).lifetime_s() == 1200
    with pytest.raises(ConfigError, match="24 h"):
        ModalConfig(rollout_timeout_s=90000)
    with pytest.raises(ConfigError, match="exactly one"):
        ModalConfig(image=None)


@pytest.mark.anyio
async def test_missing_token_fails_fast_with_help(tmp_path: Path) -> None:
    # The real SDK, with no credentials configured: must fail before any network call.
    if ModalSDK.real().has_credentials():
        pytest.skip("Modal credentials are configured on this machine")
    backend = ModalBackend(_config(tmp_path))
    with anyio.fail_after(5), pytest.raises(ModalAuthError) as info:
        await backend.start_host(_spec())
    assert "modal token new" in str(info.value)
    assert "MODAL_TOKEN_ID" in str(info.value)


@pytest.mark.anyio
async def test_auth_error_from_the_sdk_is_explained(tmp_path: Path, fake: Any) -> None:
    fake.auth_error = True
    with pytest.raises(ModalAuthError, match="modal token new"):
        await ModalBackend(_config(tmp_path), sdk=fake.sdk()).start_host(_spec())
    fake.auth_error = False
    fake.fail_create = modal.exception.AuthError("expired")
    with pytest.raises(ModalAuthError, match="MODAL_TOKEN_ID"):
        await ModalBackend(_config(tmp_path), sdk=fake.sdk()).start_host(_spec())


@pytest.mark.anyio
@pytest.mark.skipif(not os.environ.get("MODAL_TOKEN_ID"), reason="MODAL_TOKEN_ID is not set")
async def test_live_modal_sandbox() -> None:
    config = ModalConfig(
        app_name="hermes-sandbox-tests", rollout_timeout_s=120, verification_timeout_s=60
    )
    backend = ModalBackend(config)
    spec = HostSpec(pool_name="hermes-live-test", host_id="hermes-live-test-h0", slots=2)
    await backend.sweep_orphans(spec.pool_name)
    host = await backend.start_host(spec)
    try:
        slot = host.slot(1)
        result = await slot.exec("echo hi && pwd", timeout=60)
        assert result.stdout == f"hi\n{slot.workspace}\n"
        await slot.write_file("a.bin", b"\x00\xff")
        assert await slot.read_file("a.bin") == b"\x00\xff"
        blocked = await slot.exec("curl -sS -m 5 https://example.com", timeout=30)
        assert not blocked.ok
    finally:
        await host.close()
