"""hermes-sandbox containers: per-command latency, reset and start cost of docker and gVisor.

Everything is measured in the same run against a raw ``bash -c true`` subprocess, interleaved
command by command: the docker and gVisor slots (``hermes-exec`` as the container's PID 1, a
command is one message to it) and, as the reference of what every command used to cost on
docker, a plain ``docker exec CONTAINER true`` into an idle container of the same image. Then
the cost of a reset (restored in place, the default; or a fresh container) and of starting a
slot. The images come from ``.ci/docker.sh`` and ``.ci/gvisor.sh``; a backend that cannot run
here is reported as not measured, with why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
from hermes_protocols import Slot
from hermes_sandbox import HostBackend, PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import DockerBackend, DockerConfig, docker_available
from hermes_sandbox.backends.gvisor import GvisorBackend, GvisorConfig

from benchmarks.report import write_section

ROUNDS = 200
RESETS = 30
STARTS = 10
IMAGE = "hermes-sandbox-base:bookworm-minbase"
CACHE = Path.home() / ".cache" / "hermes-rl"
COMMAND = "uv run --frozen --no-sync python -m benchmarks containers"

Call = Callable[[], Awaitable[object]]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


async def _docker_reason() -> str | None:
    reason = await docker_available()
    if reason is None:
        found = await anyio.run_process(["docker", "image", "inspect", IMAGE], check=False)
        if found.returncode != 0:
            reason = f"image {IMAGE} is missing (run .ci/docker.sh)"
    return reason


def _gvisor_config(root: Path) -> GvisorConfig | str:
    runsc = sorted(CACHE.glob("runsc-*/usr/bin/runsc"))
    rootfs = CACHE / "gvisor-rootfs-bookworm-minbase"
    if os.geteuid() != 0 or not runsc or not rootfs.is_dir():
        return "runsc (root) or its rootfs is missing (run .ci/gvisor.sh)"
    return GvisorConfig(rootfs=str(rootfs), runsc=str(runsc[-1]), root_dir=str(root / "gvisor"))


async def _backends(root: Path, *, fresh: bool = False) -> tuple[dict[str, HostBackend], list[str]]:
    backends: dict[str, HostBackend] = {}
    notes = []
    reason = await _docker_reason()
    if reason is None:
        config = DockerConfig(
            image=IMAGE, root_dir=str(root / "docker"), fresh_container_on_reset=fresh
        )
        backends["docker"] = DockerBackend(config)
    else:
        notes.append(f"docker not measured: {reason}")
    gvisor = _gvisor_config(root)
    if isinstance(gvisor, str):
        notes.append(f"gVisor not measured: {gvisor}")
    else:
        backends["gvisor"] = GvisorBackend(gvisor)
    return backends, notes


async def _timed(call: Call) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def _exec(slot: Slot) -> Call:
    return lambda: slot.exec("true", timeout=30)


def _release(pool: SandboxPool, slot: Slot) -> Call:
    return lambda: pool.release(slot)


@contextlib.asynccontextmanager
async def _idle_container() -> AsyncIterator[str]:
    """A plain container of the image, for the ``docker exec`` reference."""
    name = f"bench-exec-{uuid.uuid4().hex[:8]}"
    run = ["docker", "run", "-d", "--rm", "--name", name, "--network", "none", IMAGE]
    await anyio.run_process([*run, "sleep", "3600"])
    try:
        yield name
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.run_process(["docker", "rm", "-f", name], check=False)


async def _latency(root: Path) -> tuple[dict[str, list[float]], list[str]]:
    backends, notes = await _backends(root)
    calls: dict[str, Call] = {
        "raw `bash -c true`": lambda: anyio.run_process(["bash", "-c", "true"])
    }
    async with contextlib.AsyncExitStack() as stack:
        if "docker" in backends:
            container = await stack.enter_async_context(_idle_container())
            argv = ["docker", "exec", container, "true"]
            calls["`docker exec` (the old per-command path)"] = lambda: anyio.run_process(argv)
        for name, backend in backends.items():
            config = PoolConfig(name=f"bench-{name}", slots_per_host=1, max_hosts=1)
            pool = await stack.enter_async_context(SandboxPool(backend, config))
            slot = await pool.acquire("lat")
            calls[f"{name} `slot.exec`"] = _exec(slot)
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for call in calls.values():
            await call()  # warm up
        for _ in range(ROUNDS):
            for name, call in calls.items():
                samples[name].append(await _timed(call))
    return samples, notes


async def _resets(root: Path) -> dict[str, list[float]]:
    """Seconds per release (the reset) with a used slot: restored in place, or recreated."""
    variants: dict[str, list[float]] = {}
    for mode, fresh in (("restored in place", False), ("fresh container", True)):
        backends, _ = await _backends(root / mode.replace(" ", "-"), fresh=fresh)
        for name, backend in backends.items():
            if name == "gvisor" and fresh:
                continue  # gVisor slots always restore in place
            config = PoolConfig(name=f"bench-reset-{name}", slots_per_host=1, max_hosts=1)
            times: list[float] = []
            async with SandboxPool(backend, config) as pool:
                for i in range(RESETS):
                    slot = await pool.acquire(f"r{i}")
                    await slot.exec("echo x > f; sleep 30 >/dev/null 2>&1 &", timeout=30)
                    times.append(await _timed(_release(pool, slot)))
            variants[f"{name}, {mode}"] = times
    return variants


async def _starts(root: Path) -> dict[str, list[float]]:
    """Seconds from pool start to a slot's first command, one fresh host each time."""
    backends, _ = await _backends(root / "starts")
    starts: dict[str, list[float]] = {}
    for name, backend in backends.items():
        times = []
        for i in range(STARTS):
            config = PoolConfig(name=f"bench-start-{name}-{i}", slots_per_host=1, max_hosts=1)
            started = time.perf_counter()
            async with SandboxPool(backend, config) as pool:
                slot = await pool.acquire("s")
                await slot.exec("true", timeout=30)
                times.append(time.perf_counter() - started)
                await pool.release(slot)
        starts[name] = times
    return starts


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min) / {five:.1f} (5 min)"


def _table(samples: dict[str, list[float]], base: float | None) -> list[str]:
    head = "| variant | median ms | p95 ms |" + (" median / raw |" if base else "")
    rows = [head, "|---|---:|---:|" + ("---:|" if base else "")]
    for name, values in samples.items():
        med = statistics.median(values)
        ratio = f" {med / base:.1f}x |" if base else ""
        rows.append(f"| {name} | {med * 1000:.1f} | {_p95(values) * 1000:.1f} |{ratio}")
    return rows


async def _run(root: Path) -> str:
    load_before = _load()
    samples, notes = await _latency(root)
    resets = await _resets(root)
    starts = await _starts(root)
    base = statistics.median(samples["raw `bash -c true`"])
    return "\n".join(
        [
            f"Load average of this shared 2-core machine: {load_before} before, {_load()} "
            "after (other work was running; read the ratios, measured interleaved).",
            *notes,
            "",
            f"### Per-command latency ({ROUNDS} sequential `true` commands, interleaved)",
            "",
            *_table(samples, base),
            "",
            f"### Reset ({RESETS} releases of a slot that wrote a file and left a process)",
            "",
            *_table(resets, None),
            "",
            f"### Start ({STARTS} pools of one fresh slot: pool start to its first command)",
            "",
            *_table(starts, None),
        ]
    )


def main() -> None:
    root = Path("/tmp/hermes-sandbox-bench") / f"containers-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True, mode=0o755)
    try:
        body = anyio.run(_run, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    title = "hermes-sandbox containers: docker and gVisor commands, resets, starts"
    write_section("containers", title, COMMAND, body)
