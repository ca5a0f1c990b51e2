"""hermes-sandbox: per-command latency, acquire/release cycles, 100-slot throughput.

Baselines measured in the same run: a raw ``bash -c`` subprocess (what any sandbox must at
least pay) and hermes-agent 0.19.0's local terminal tool, installed from PyPI into a throwaway
venv (``uv venv`` + ``uv pip install``), never into the project. The remote-server backend is
measured through sandbox servers started with ``running_server`` on loopback in the same
process (one with bwrap inside, as deployed, and one with the local backend inside, which
shows the HTTP round trip alone). Latency samples are interleaved command by command, and the
throughput runs round by round (raw, local, bwrap, repeated), so the machine's load, recorded
before and after, hits every variant alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import tempfile
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import attrs
from hermes_protocols import Slot
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    HostBackend,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    RemoteBackend,
    RemoteConfig,
    SandboxPool,
    ServerConfig,
    TerminalTool,
    running_server,
)

from benchmarks.report import write_section

LATENCY_ROUNDS = 200
CYCLES = 100
SLOTS = 100
COMMANDS_PER_SLOT = 50
THROUGHPUT_ROUNDS = 3
HERMES_AGENT = "hermes-agent==0.19.0"
COMMAND = "uv run --frozen --no-sync python -m benchmarks sandbox"
SERVER_TOKEN = "bench-sandbox-token"

_AGENT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from tools.terminal_tool import terminal_tool
    terminal_tool("true")
    out = []
    for _ in range(int(sys.argv[1])):
        t = time.perf_counter()
        terminal_tool("true")
        out.append(time.perf_counter() - t)
    print(json.dumps(out))
    """
)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _backends(root: Path) -> dict[str, HostBackend]:
    return {
        "local": LocalBackend(LocalConfig(root_dir=str(root / "local"))),
        "bwrap": BwrapBackend(BwrapConfig(root_dir=str(root / "bwrap"))),
    }


async def _time(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def _exec_call(slot: Slot) -> Callable[[], Awaitable[object]]:
    return lambda: slot.exec("true", timeout=30)


def _tool_call(tool: TerminalTool, slot: Slot) -> Callable[[], Awaitable[object]]:
    return lambda: tool(slot, {"command": "true"})


async def _raw() -> None:
    await anyio.run_process(["bash", "-c", "true"])


async def _hermes_agent_latencies(rounds: int) -> tuple[list[float], str]:
    """Latencies of hermes-agent's local terminal tool, or ([], why it could not run)."""
    if shutil.which("uv") is None:
        return [], "uv is not on PATH"
    with tempfile.TemporaryDirectory(prefix="hermes-agent-bench-") as tmp:
        venv = Path(tmp) / "venv"
        python = venv / "bin" / "python"
        try:
            with anyio.fail_after(300):
                await anyio.run_process(["uv", "venv", "-q", str(venv)])
                await anyio.run_process(
                    ["uv", "pip", "install", "-q", "--python", str(python), HERMES_AGENT]
                )
        except Exception as exc:  # report any install failure honestly
            return [], f"could not install {HERMES_AGENT}: {exc}"
        home = Path(tmp) / "home"
        home.mkdir()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TERMINAL_CWD": tmp}
        try:
            with anyio.fail_after(300):
                done = await anyio.run_process(
                    [str(python), "-c", _AGENT_SCRIPT, str(rounds)], env=env, cwd=tmp
                )
        except Exception as exc:
            return [], f"hermes-agent's terminal tool failed: {exc}"
        return [float(x) for x in json.loads(done.stdout.decode().splitlines()[-1])], ""


async def _latency(root: Path) -> tuple[dict[str, list[float]], str]:
    samples: dict[str, list[float]] = {"raw `bash -c true`": []}
    tool = TerminalTool()
    async with contextlib.AsyncExitStack() as stack:
        backends: dict[str, HostBackend] = dict(_backends(root))
        for inside in ("bwrap", "local"):
            data = root / f"server-{inside}"
            server_backend = _backends(data)[inside]
            slots_per_host = PoolConfig(name="bench").slots_per_host
            config = ServerConfig(slots=slots_per_host, data_dir=str(data), token=SERVER_TOKEN)
            url = await stack.enter_async_context(running_server(config, server_backend))
            backends[f"remote-server ({inside} inside)"] = RemoteBackend(
                RemoteConfig(urls=(url,), token=SERVER_TOKEN)
            )
        slots: dict[str, Slot] = {}
        for name, backend in backends.items():
            pool = SandboxPool(backend, PoolConfig(name=f"bench-lat-{len(slots)}"))
            await stack.enter_async_context(pool)
            slots[name] = await pool.acquire("lat")
        calls: dict[str, Callable[[], Awaitable[object]]] = {"raw `bash -c true`": _raw}
        for name, slot in slots.items():
            calls[f"{name} `slot.exec`"] = _exec_call(slot)
            calls[f"{name} `terminal` tool"] = _tool_call(tool, slot)
        for name in calls:
            samples[name] = []
        for _ in range(LATENCY_ROUNDS):  # interleaved, so drift hits every variant alike
            for name, call in calls.items():
                samples[name].append(await _time(call))
    agent, why = await _hermes_agent_latencies(LATENCY_ROUNDS)
    if agent:
        samples["hermes-agent 0.19.0 local `terminal_tool`"] = agent
    return samples, why


async def _cycles(backend: HostBackend, name: str, reset: bool) -> float:
    async with SandboxPool(backend, PoolConfig(name=name, slots_per_host=1, min_hosts=1)) as pool:
        started = time.perf_counter()
        for i in range(CYCLES):
            slot = await pool.acquire(f"c{i}")
            await slot.write_file("f.txt", b"x" * 1000)
            await pool.release(slot, reset=reset)
        return CYCLES / (time.perf_counter() - started)


@attrs.frozen
class _Rates:
    total: float
    """Commands/s over everything: pool start, every sandbox's start, release."""
    warm: float
    """Commands/s once every slot has run its first command (its sandbox has started)."""


async def _throughput(backend: HostBackend | None, name: str) -> _Rates:
    """``SLOTS`` concurrent workers x ``COMMANDS_PER_SLOT`` commands; ``None``: raw processes."""
    warmed = 0
    all_warm = anyio.Event()
    warm_at: list[float] = []

    async def run(command: Callable[[int], Awaitable[None]]) -> None:
        nonlocal warmed
        await command(0)
        warmed += 1
        if warmed == SLOTS:
            warm_at.append(time.perf_counter())
            all_warm.set()
        await all_warm.wait()
        for j in range(1, COMMANDS_PER_SLOT):
            await command(j)

    async def raw(j: int) -> None:
        await anyio.run_process(["bash", "-c", f"echo {j}"])

    async def worker(pool: SandboxPool, i: int) -> None:
        slot = await pool.acquire(f"t{i}")

        async def command(j: int) -> None:
            result = await slot.exec(f"echo {j}", timeout=300)
            assert result.stdout == f"{j}\n", result

        await run(command)
        await pool.release(slot)

    started = time.perf_counter()
    if backend is None:
        async with anyio.create_task_group() as tg:
            for _ in range(SLOTS):
                tg.start_soon(run, raw)
    else:
        config = PoolConfig(name=name, slots_per_host=25, max_hosts=SLOTS // 25)
        async with SandboxPool(backend, config) as pool, anyio.create_task_group() as tg:
            for i in range(SLOTS):
                tg.start_soon(worker, pool, i)
    ended = time.perf_counter()
    return _Rates(
        total=SLOTS * COMMANDS_PER_SLOT / (ended - started),
        warm=SLOTS * (COMMANDS_PER_SLOT - 1) / (ended - warm_at[0]),
    )


async def _throughputs(root: Path) -> dict[str, list[_Rates]]:
    rates: dict[str, list[_Rates]] = {"raw": [], "local": [], "bwrap": []}
    for round_ in range(THROUGHPUT_ROUNDS):  # interleaved rounds, so load drifts hit all alike
        rates["raw"].append(await _throughput(None, "raw"))
        for name, backend in _backends(root / f"tput-{round_}").items():
            rates[name].append(await _throughput(backend, f"bench-tput-{name}"))
    return rates


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min) / {five:.1f} (5 min)"


def _latency_table(samples: dict[str, list[float]]) -> str:
    base = statistics.median(samples["raw `bash -c true`"])
    rows = [
        "| variant | median ms | p95 ms | median / raw |",
        "|---|---:|---:|---:|",
    ]
    for name, values in samples.items():
        med = statistics.median(values)
        rows.append(
            f"| {name} | {med * 1000:.2f} | {_p95(values) * 1000:.2f} | {med / base:.2f}x |"
        )
    return "\n".join(rows)


async def _run(root: Path) -> str:
    load_before = _load()
    try:
        samples, agent_note = await _latency(root)
        cycles = {
            f"{name}, reset on release": await _cycles(backend, f"bench-cyc-{name}", True)
            for name, backend in _backends(root).items()
        }
        cycles.update(
            {
                f"{name}, no reset": await _cycles(backend, f"bench-cyc-{name}-nr", False)
                for name, backend in _backends(root).items()
            }
        )
        rates = await _throughputs(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    raw_total = statistics.median(r.total for r in rates["raw"])
    raw_warm = statistics.median(r.warm for r in rates["raw"])
    lines = [
        f"Load average of this shared 2-core machine: {load_before} before, {_load()} after "
        "(other work was running; the ratios, measured interleaved, are the numbers to read).",
        "",
        f"### Per-command latency ({LATENCY_ROUNDS} sequential `true` commands, interleaved)",
        "",
        _latency_table(samples),
        "",
    ]
    lines += [
        "`remote-server (X inside)`: a slot of a sandbox server (`running_server`, loopback "
        "HTTP, in this process and event loop) whose host is the X backend; the `local inside` "
        "row minus `local` is the HTTP round trip.",
        "",
    ]
    if agent_note:
        lines += [f"hermes-agent comparison not measured: {agent_note}", ""]
    lines += [
        f"### Acquire/release cycles ({CYCLES} cycles: acquire, write 1 kB, release)",
        "",
        "| pool | cycles/s |",
        "|---|---:|",
        *(f"| {name} | {rate:.0f} |" for name, rate in cycles.items()),
        "",
        f"### Throughput: {SLOTS} concurrent slots x {COMMANDS_PER_SLOT} commands",
        "",
        f"{THROUGHPUT_ROUNDS} interleaved rounds (raw, local, bwrap; again). *all*: the whole "
        f"run, i.e. each sandboxed round starts its pool ({SLOTS // 25} hosts x 25 slots, every "
        "slot's sandbox with its first command) and releases every slot inside the timed part "
        "(the issue's measure); *warm*: from the moment every worker has run its first command "
        "(all sandboxes started) to the end, release included.",
        "",
        "| variant | all: commands/s (median) | rounds | vs raw | warm: commands/s | vs raw |",
        "|---|---:|---|---:|---:|---:|",
        *(
            f"| {'raw `bash -c`' if name == 'raw' else name} "
            f"| {statistics.median(r.total for r in values):.0f} "
            f"| {', '.join(f'{r.total:.0f}' for r in values)} "
            f"| {statistics.median(r.total for r in values) / raw_total:.2f}x "
            f"| {statistics.median(r.warm for r in values):.0f} "
            f"| {statistics.median(r.warm for r in values) / raw_warm:.2f}x |"
            for name, values in rates.items()
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parent = Path("/tmp/hermes-sandbox-bench")  # slot uids must be able to traverse it
    parent.mkdir(mode=0o755, exist_ok=True)
    parent.chmod(0o755)
    root = parent / uuid.uuid4().hex[:8]
    root.mkdir(mode=0o755)
    body = anyio.run(_run, root)
    write_section("sandbox", "hermes-sandbox: commands, pool cycles, throughput", COMMAND, body)
