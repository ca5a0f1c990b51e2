"""endless_terminals on the ray sandbox backend, on the session's live two-node Ray cluster (the
root conftest's ``ray_cluster``): a batch of oracle rollouts through the real runner and tools,
every one scored 1.0, with hosts on both nodes."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hermes_envs import EndlessTerminalsEnv, RolloutRunner, RunnerConfig
from hermes_protocols import Item, Slot
from hermes_sandbox import BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.tools import default_toolsets

from .test_envs_on_bwrap import OracleAgent

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from hermes_sandbox.backends.ray import RayBackend, RayConfig, RaySlot  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ITEMS = 8
CONCURRENCY = 4


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def hosts_root() -> Iterator[Path]:
    """The hosts' directory, where slot uids can traverse (pytest's own temp dirs are 0700);
    nothing but the bwrap cache may be left in it."""
    root = Path(tempfile.mkdtemp(prefix="hermes-envs-ray-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
        assert sorted(p.name for p in root.iterdir() if p.name != ".bin") == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _NodesSeen(SandboxPool):
    """A pool that notes the Ray node of every slot it hands out."""

    nodes: set[str]

    async def acquire(self, trajectory_id: str, *, timeout: float | None = None) -> Slot:
        slot = await super().acquire(trajectory_id, timeout=timeout)
        assert isinstance(slot, RaySlot)
        self.nodes.add(slot.node_id)
        return slot


async def test_an_oracle_batch_scores_one_on_every_item_on_both_nodes(
    ray_cluster: Any, hosts_root: Path
) -> None:
    backend = RayBackend(
        RayConfig(
            address=ray_cluster.address,
            cpus=0.25,
            python=ray_cluster.python,
            bwrap=BwrapConfig(root_dir=str(hosts_root)),
        )
    )
    env = EndlessTerminalsEnv()
    items = list(itertools.islice(env.items(seed=0), ITEMS))
    pool = _NodesSeen(
        backend,
        PoolConfig(name="o" + uuid.uuid4().hex[:8], slots_per_host=2, min_hosts=2, max_hosts=2),
    )
    pool.nodes = set()
    rewards: dict[str, float] = {}
    async with pool:
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def one(item: Item) -> None:
            async with limiter:
                toolsets = list(default_toolsets().values())
                agent = OracleAgent(env.oracle_solution(item))
                config = RunnerConfig(max_attempts=1, retry_delay_s=0.0)
                runner = RolloutRunner(env, pool, agent, toolsets, config=config)
                rollout = await runner.run_rollout(item, toolsets)
            rewards[item.id] = rollout.score.reward if rollout.score else 0.0

        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(one, item)
    assert rewards == {item.id: 1.0 for item in items}
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(alive) == 2
    assert pool.nodes == alive
