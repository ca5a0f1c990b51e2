"""Issue 24, the persistent executor of bwrap slots: cancellation, a dying agent, bounded output,
concurrent commands in one slot, and the wire format (its speed: test_bwrap_backend.py)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import attrs
import psutil
import pytest
from hermes_protocols import SandboxError, Slot
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.executor import ExecRequest, Executor, ExecutorDied, build_agent, handshake
from hermes_sandbox.executor.wire import HEADER, encode_request

pytestmark = pytest.mark.anyio

AGENT_CACHE = Path("/tmp/hermes-sandbox-tests/.agent-bin")


def test_request_encoding_is_framed_and_refuses_what_the_agent_cannot_take() -> None:
    request = ExecRequest(
        argv=("bash", "-c", "true"), env={"A": "1"}, cwd="/w", timeout_s=1.5, max_output_bytes=64
    )
    frame = encode_request(request)
    length, kind = HEADER.unpack(frame[: HEADER.size])
    assert (kind, length) == (ord("R"), len(frame) - HEADER.size)
    assert b"A=1" in frame
    assert b"bash" in frame
    with pytest.raises(ValueError, match="NUL"):
        encode_request(
            ExecRequest(argv=("a\0b",), env={}, cwd=None, timeout_s=1, max_output_bytes=8)
        )
    with pytest.raises(ValueError, match="argv"):
        encode_request(ExecRequest(argv=(), env={}, cwd=None, timeout_s=1, max_output_bytes=8))


@pytest.fixture
async def slot(sandbox_root: Path) -> AsyncIterator[Slot]:
    backend = BwrapBackend(BwrapConfig(root_dir=str(sandbox_root)))
    async with SandboxPool(backend, PoolConfig(name="exec", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        yield slot
        await pool.release(slot)


def _token() -> str:
    return f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}"


async def _gone(find: Callable[[str], list[int]], token: str) -> bool:
    for _ in range(100):
        if not find(token):
            return True
        await anyio.sleep(0.05)
    return False


@pytest.mark.slow
async def test_a_cancelled_command_dies_with_its_whole_tree(
    slot: Slot, leftover_processes: Callable[[str], list[int]]
) -> None:
    token = _token()
    with anyio.move_on_after(1.0) as scope:
        await slot.exec(f"sleep {token} & (setsid sleep {token} &); sleep {token}", timeout=60)
    assert scope.cancelled_caught
    assert await _gone(leftover_processes, token)
    assert (await slot.exec("echo still-fine", timeout=30)).stdout == "still-fine\n"


@pytest.mark.slow
async def test_an_agent_that_dies_is_a_sandbox_error_then_a_fresh_sandbox(slot: Slot) -> None:
    await slot.exec("true", timeout=30)
    agent = slot._agent  # type: ignore[attr-defined]
    assert agent is not None

    async def kill_soon() -> None:
        await anyio.sleep(0.5)
        os.killpg(agent.process.pid, 9)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_soon)
        with pytest.raises(ExecutorDied, match="died during a command"):
            await slot.exec("sleep 30", timeout=60)
    assert isinstance(ExecutorDied("x"), SandboxError)
    again = await slot.exec("echo back", timeout=30)
    assert again.stdout == "back\n"
    assert slot._agent is not agent  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_400_mb_of_output_never_reaches_the_pool_process(slot: Slot) -> None:
    process = psutil.Process()
    before = process.memory_info().rss
    result = await slot.exec("head -c 400000000 /dev/zero | tr '\\0' y", timeout=120)
    grown = process.memory_info().rss - before
    assert result.ok
    assert result.truncated
    assert "omitted of 400000000" in result.stdout
    assert len(result.stdout) < 1_100_000
    assert grown < 64 << 20, f"the pool process grew by {grown >> 20} MiB"


@pytest.mark.slow
async def test_concurrent_commands_of_one_slot_cannot_see_or_kill_each_other(slot: Slot) -> None:
    nap = f"2.{random.randint(100_000, 999_999)}"  # a sleep only the first command runs
    results: dict[str, str] = {}

    async def sleeper() -> None:
        results["sleeper"] = (await slot.exec(f"sleep {nap} && echo woke", timeout=30)).stdout

    async def hunter() -> None:
        await anyio.sleep(1.0)
        pattern = f'"^$p {nap}"'  # "$p" keeps this command's own line from matching
        found = await slot.exec(
            f"p=sleep; ps -eo args | grep -c {pattern}; pkill -f {pattern}; echo $?", timeout=30
        )
        results["hunter"] = found.stdout

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        tg.start_soon(hunter)
    assert results["hunter"].split() == ["0", "1"]  # not visible, nothing to kill
    assert results["sleeper"] == "woke\n"


@pytest.mark.slow
async def test_a_sandbox_outlives_the_worker_threads_of_its_start(slot: Slot) -> None:
    """bwrap's --die-with-parent fires when the *thread* that started it exits: sandboxes
    started from anyio worker threads died when anyio retired those threads (idle 10 s)."""
    await slot.exec("true", timeout=30)
    agent = slot._agent  # type: ignore[attr-defined]
    async with anyio.create_task_group() as tg:  # the last worker used gets a younger sibling
        tg.start_soon(anyio.to_thread.run_sync, time.sleep, 0.1)
        tg.start_soon(anyio.to_thread.run_sync, time.sleep, 0.5)
    await anyio.sleep(11)
    await anyio.to_thread.run_sync(time.sleep, 0)  # retires every other worker idle for 10 s
    await anyio.sleep(1)
    later = await slot.exec("echo alive", timeout=30)
    assert later.stdout == "alive\n"
    assert slot._agent is agent  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_the_agent_without_namespaces_over_a_socket_it_connects_to(
    tmp_path: Path, leftover_processes: Callable[[str], list[int]]
) -> None:
    """How a container backend runs hermes-exec: no capability (no --pidns), control over a
    unix socket the client listens on (--connect). Orphans still die with their command."""
    agent_bin = await anyio.to_thread.run_sync(build_agent, str(AGENT_CACHE))
    socket_path = tmp_path / "control.sock"
    listener = await anyio.create_unix_listener(socket_path)
    agent = await anyio.open_process(
        [agent_bin, "--connect", str(socket_path)], stderr=None, start_new_session=True
    )
    try:
        async with listener:
            control = await listener.accept()
        await handshake(control, timeout=30)
        executor = Executor(control, "direct")
        token = _token()
        request = ExecRequest(
            argv=("bash", "-c", f"(setsid sleep {token} &); sleep {token} & echo started"),
            env={"PATH": "/usr/bin:/bin"},
            cwd=str(tmp_path),
            timeout_s=30,
            max_output_bytes=1 << 16,
        )
        result = await executor.run(request)
        assert (result.exit_code, result.stdout) == (0, "started\n")
        assert await _gone(leftover_processes, token)  # the subreaper killed both orphans
        slow = attrs.evolve(request, argv=("bash", "-c", f"sleep {token}"), timeout_s=0.5)
        timed = await executor.run(slow)
        assert (timed.exit_code, timed.timed_out) == (124, True)
        assert await _gone(leftover_processes, token)
        await executor.aclose()  # the client goes away: the agent ends
        with anyio.fail_after(10):
            assert await agent.wait() == 0
    finally:
        if agent.returncode is None:
            agent.kill()
        await agent.aclose()
