"""The ray backend on the session's live two-node Ray cluster (the root conftest's
``ray_cluster``): hosts spread over both nodes, files through the actors, nothing left on
any node once the pool closes (checked by a Ray task pinned to each node), a lost node.

The conformance and isolation suites run on it too (the ``ray`` case of the conftest); they
need one node. The node-loss test leaves the session's cluster with its head node only (a
node started again on this machine did not register within minutes on a loaded CI machine),
so it is marked ``breaks_cluster``: the root conftest runs it after every other test of the
cluster, such as the oracle batch of ``tests/test_envs_on_ray.py`` that needs both nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from hermes_protocols import ConfigError, SandboxError
from hermes_sandbox import BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.factory import SandboxSpec, build_backend

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from hermes_sandbox.backends.ray import RayBackend, RayConfig, RaySlot  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

pytestmark = pytest.mark.anyio

#: how long the cluster may take to mark a killed node dead (Ray's GCS health checks)
NODE_DEATH_S = 90


def _backend(cluster: Any, root: Path) -> RayBackend:
    return RayBackend(
        RayConfig(
            address=cluster.address,
            cpus=0.25,
            python=cluster.python,
            bwrap=BwrapConfig(root_dir=str(root)),
        )
    )


def _pool(backend: RayBackend, **fields: Any) -> SandboxPool:
    return SandboxPool(backend, PoolConfig(name="r" + uuid.uuid4().hex[:8], **fields))


def _alive_nodes() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


async def test_hosts_are_placed_on_both_nodes(ray_cluster: Any, sandbox_root: Path) -> None:
    async with _pool(_backend(ray_cluster, sandbox_root), slots_per_host=1, max_hosts=4) as pool:
        slots = [await pool.acquire(f"t{i}") for i in range(4)]
        assert all(isinstance(s, RaySlot) for s in slots)
        nodes = {s.node_id for s in slots if isinstance(s, RaySlot)}
        assert len(_alive_nodes()) == 2
        assert nodes == _alive_nodes()
        for i, slot in enumerate(slots):
            result = await slot.exec(f"echo {i} > mine; cat mine", timeout=30)
            assert result.stdout == f"{i}\n"
            await pool.release(slot)


async def test_large_files_move_both_ways_in_chunks(
    ray_cluster: Any, sandbox_root: Path, tmp_path: Path
) -> None:
    data = os.urandom(3 * (1 << 20) + 123)  # four chunks
    source, back = tmp_path / "in.bin", tmp_path / "out.bin"
    source.write_bytes(data)
    async with _pool(_backend(ray_cluster, sandbox_root), slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        assert isinstance(slot, RaySlot)
        await slot.upload(str(source), "sub/data.bin")
        listed = await slot.exec("wc -c < sub/data.bin", timeout=30)
        assert listed.stdout.strip() == str(len(data))
        await slot.download("sub/data.bin", str(back))
        assert back.read_bytes() == data
        (tmp_path / "empty").write_bytes(b"")
        await slot.upload(str(tmp_path / "empty"), "empty")
        assert await slot.read_file("empty") == b""
        with pytest.raises(FileNotFoundError):
            await slot.download("missing", str(tmp_path / "missing"))
        assert not (tmp_path / "missing").exists()
        await pool.release(slot)


def _leftovers_on_this_node(root: str) -> list[str]:
    """Host actors, processes, mounts and directories of the pool under ``root`` on the node
    this runs on (a Ray task pinned there; the host cache ``.bin`` is kept on purpose)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            command = " ".join(proc.info["cmdline"] or [])
            if "SandboxHostActor" in command or root in command:
                found.append(f"process {proc.pid}: {command[:160]}")
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        found += [f"mount {m}" for m in (line.split()[4] for line in f) if m.startswith(root)]
    found += [f"path {name}" for name in os.listdir(root) if name != ".bin"]
    return found


async def _leftovers_on_every_node(root: Path) -> dict[str, list[str]]:
    probe: Any = ray.remote(num_cpus=0)(_leftovers_on_this_node)
    nodes = sorted(_alive_nodes())
    found = await asyncio.gather(
        *(
            probe.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
            ).remote(str(root))
            for node in nodes
        )
    )
    return dict(zip(nodes, found, strict=True))


async def test_nothing_is_left_on_any_node_after_the_pool_closes(
    ray_cluster: Any, sandbox_root: Path
) -> None:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the probe, on the nodes
    async with _pool(_backend(ray_cluster, sandbox_root), slots_per_host=2, max_hosts=2) as pool:
        slots = [await pool.acquire(f"t{i}") for i in range(4)]
        assert {s.node_id for s in slots if isinstance(s, RaySlot)} == _alive_nodes()
        for slot in slots:
            await slot.exec("echo data > kept; (sleep 300 &) ; true", timeout=30)
        during = await _leftovers_on_every_node(sandbox_root)
        assert all(any("SandboxHostActor" in f for f in found) for found in during.values())
    deadline = anyio.current_time() + 30  # ray.kill ends an actor's worker asynchronously
    after = await _leftovers_on_every_node(sandbox_root)
    while any(after.values()) and anyio.current_time() < deadline:
        await anyio.sleep(0.5)
        after = await _leftovers_on_every_node(sandbox_root)
    assert after == {node: [] for node in _alive_nodes()}


@pytest.mark.breaks_cluster
async def test_a_lost_node_fails_its_slots_and_the_pool_goes_on(
    ray_cluster: Any, sandbox_root: Path
) -> None:
    async with _pool(_backend(ray_cluster, sandbox_root), slots_per_host=1, max_hosts=2) as pool:
        first, second = await pool.acquire("a"), await pool.acquire("b")
        assert isinstance(first, RaySlot)
        assert isinstance(second, RaySlot)
        assert first.node_id != second.node_id
        head = ray.get_runtime_context().get_node_id()  # the driver's node is the head
        lost, kept = (first, second) if first.node_id != head else (second, first)
        ray_cluster.kill_node(lost.node_id)
        with pytest.raises(SandboxError, match="gone"):
            await lost.exec("echo never", timeout=30)
        assert (await kept.exec("echo still", timeout=30)).stdout == "still\n"
        await pool.release(lost)  # its reset fails: the pool drops the host
        replacement = await pool.acquire("c", timeout=120)
        assert isinstance(replacement, RaySlot)
        assert replacement.node_id == kept.node_id
        assert (await replacement.exec("echo new", timeout=30)).stdout == "new\n"
        await pool.release(replacement)
        await pool.release(kept)
    deadline = anyio.current_time() + NODE_DEATH_S  # the cluster marks the node dead once
    alive = _alive_nodes()  # its health checks fail, not at once
    while alive != {kept.node_id} and anyio.current_time() < deadline:
        await anyio.sleep(0.5)
        alive = _alive_nodes()
    assert alive == {kept.node_id}


async def test_the_factory_needs_an_address_and_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--ray-address"):
        build_backend(SandboxSpec(kind="ray"), option_names={"ray_address": "--ray-address"})
    backend = build_backend(SandboxSpec(kind="ray", ray_address="127.0.0.1:1", cpu=0.5))
    assert isinstance(backend, RayBackend)
    assert backend.config.cpus == 0.5
