"""The ray sandbox backend: oracle endless_terminals rollouts/s on 1 and 2 Ray nodes vs bwrap.

A live two-node Ray cluster on this machine (``tests/ray_cluster.py``; the head node carries a
custom resource so a pool can be kept on it alone). Three pools of the same shape (2 hosts x 2
slots, hosts started before the clock runs): the local bwrap backend, the ray backend on the
head node only, and the ray backend spread over both nodes. Each round runs the same oracle
rollouts (concurrency 4) on each pool in turn; the table reports medians over the rounds.
Both Ray nodes share this machine's cores, so the comparison measures the backend's overhead
(an actor call per command and file), not a cluster's speedup.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from hermes_envs import EndlessTerminalsEnv, RolloutRunner, RunnerConfig
from hermes_protocols import AgentResult, Item, Message, StopReason, ToolExecutor, ToolSchema
from hermes_sandbox import BwrapBackend, BwrapConfig, HostBackend, PoolConfig, SandboxPool
from hermes_sandbox.tools import default_toolsets

from benchmarks.report import write_section

COMMAND = "uv run --frozen --no-sync python -m benchmarks ray"
ROLLOUTS = 16
CONCURRENCY = 4
ROUNDS = 3
HEAD_RESOURCE = "bench_head"


class _OracleAgent:
    """Runs the item's oracle solution in one terminal call."""

    def __init__(self, script: str) -> None:
        self.script = script

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        await executor("terminal", {"command": self.script})
        return AgentResult(messages=messages, stop_reason=StopReason.FINAL_ANSWER, turns=1)


def _cluster_module() -> Any:
    path = Path(__file__).resolve().parent.parent / "tests" / "ray_cluster.py"
    spec = importlib.util.spec_from_file_location("hermes_bench_ray_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _rate(make: Callable[[], HostBackend], name: str, items: list[Item]) -> float:
    """Rollouts per second of the oracle on ``items``; every reward must be 1.0."""
    env, backend = EndlessTerminalsEnv(), make()
    config = PoolConfig(name=name, slots_per_host=2, min_hosts=2, max_hosts=2)
    rewards: list[float] = []
    async with SandboxPool(backend, config) as pool:
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def one(item: Item) -> None:
            async with limiter:
                toolsets = list(default_toolsets().values())
                agent = _OracleAgent(env.oracle_solution(item))
                runner = RolloutRunner(env, pool, agent, toolsets, config=RunnerConfig())
                rollout = await runner.run_rollout(item, toolsets)
            rewards.append(rollout.score.reward if rollout.score else 0.0)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(one, item)
        elapsed = time.perf_counter() - start
    assert rewards == [1.0] * len(items), rewards
    return len(items) / elapsed


def main() -> None:
    # The cluster's workers run this Python already: no `uv run` replayed on every worker with
    # the repository uploaded as the job's working directory (read when Ray is imported).
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    from hermes_sandbox.backends.ray import RayBackend, RayConfig

    items = list(itertools.islice(EndlessTerminalsEnv().items(seed=0), ROLLOUTS))
    root = Path(tempfile.mkdtemp(prefix="bench-ray-", dir="/tmp"))
    root.chmod(0o755)
    rates: dict[str, list[float]] = {"bwrap": [], "ray-1-node": [], "ray-2-nodes": []}
    cluster_module = _cluster_module()
    try:
        head_args = (f'--resources={{"{HEAD_RESOURCE}": 100}}',)
        with cluster_module.ray_cluster(head_args=head_args) as c:

            def ray_backend(resources: dict[str, float]) -> RayBackend:
                return RayBackend(
                    RayConfig(
                        address=c.address,
                        cpus=0.25,
                        resources=resources,
                        python=sys.executable,
                        bwrap=BwrapConfig(root_dir=str(root / "ray")),
                    )
                )

            backends: dict[str, Callable[[], HostBackend]] = {
                "bwrap": lambda: BwrapBackend(BwrapConfig(root_dir=str(root / "bwrap"))),
                "ray-1-node": lambda: ray_backend({HEAD_RESOURCE: 1}),
                "ray-2-nodes": lambda: ray_backend({}),
            }
            for n in range(ROUNDS):
                for name, backend in backends.items():
                    pool = f"bench{n}{name.replace('-', '')}"
                    rates[name].append(anyio.run(_rate, backend, pool, items))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {name: statistics.median(values) for name, values in rates.items()}
    rows = "\n".join(
        f"| {name} | {med[name]:.2f} | {med[name] / med['bwrap']:.2f}x | "
        f"{', '.join(f'{v:.2f}' for v in rates[name])} |"
        for name in rates
    )
    body = f"""
Oracle rollouts of endless_terminals ({ROLLOUTS} items, every reward 1.0, concurrency
{CONCURRENCY}) on three pools of 2 hosts x 2 slots, hosts started before timing: the local
bwrap backend, the ray backend kept on the head node of a live two-node Ray cluster on this
machine, and the ray backend spread over both nodes. {ROUNDS} rounds, the pools interleaved
in each; medians. Both Ray nodes share this machine's 2 cores, so this measures what the
actor hop costs (a Ray call per command, file and reset), not a cluster's speedup: on real
nodes, the second node adds its own cores.

| pool | rollouts/s (median) | vs bwrap | rounds |
|---|---|---|---|
{rows}
"""
    write_section("ray", "hermes-sandbox: the ray backend", COMMAND, body)


if __name__ == "__main__":
    main()
