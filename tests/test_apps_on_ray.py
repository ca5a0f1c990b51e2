"""The apps on the ray sandbox backend, on the session's live Ray cluster (the root conftest's
``ray_cluster``), through their real command lines with the embedded model.

- The Atropos environment's ``process`` with ``--env.tool_pool_mode ray``: its groups written,
  its sandboxes Ray actors on the cluster.

The batch runner on ``--sandbox ray``:

- Its driver killed mid-run: Ray ends the host actors it owned, and within seconds nothing of
  them is left on any node (no process, and, removed by each host's reaper, no slot mount or
  host directory); the resumed run writes every item exactly once.
- A node killed mid-run, just after a rollout set up its slot there: that rollout fails for
  infrastructure, is retried on the nodes left, and every item ends exactly once in the run's
  records. The node killed is a third one this test adds, and the test waits until the
  cluster marks it dead, so the session's two nodes are left as they were for the other tests.

Both nodes share this machine, so "on any node" is checked machine-wide: every process, and
the mount table, under the run's host directories.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from hermes_batch_runner.wiring import pool_name
from hermes_sandbox.backends._root_dir import default_root_dir

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "apps" / "batch_runner"
ATROPOS_APP = ROOT / "apps" / "atropos_env"
ITEMS = 8
#: how long a run, or Ray ending a dead driver's actors, may take on a loaded machine
RUN_TIMEOUT_S = 600.0
#: how long after a driver's SIGKILL its actors, and what they held on the nodes, may remain
REAPED_WITHIN_S = 120.0
ACTOR = "SandboxHostActor"
#: how long the cluster may take to mark a killed node dead (Ray's GCS health checks)
NODE_DEATH_S = 90


def _command(cluster: Any, out: Path, hosts: int, *extra: str, items: int = ITEMS) -> list[str]:
    return [
        sys.executable,
        str(APP),
        "--env",
        "endless_terminals",
        "--num-items",
        str(items),
        "--max-turns",
        "2",
        "--max-tokens",
        "48",
        "--sandbox",
        "ray",
        "--ray-address",
        cluster.address,
        "--ray-python",
        cluster.python,
        "--sandbox-slots",
        "1",
        "--sandbox-max-hosts",
        str(hosts),
        "--concurrency",
        str(hosts),
        "--no-progress",
        "--output",
        str(out),
        *extra,
    ]


def _start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(command, cwd=log.parent, stdout=sink, stderr=subprocess.STDOUT)


def _wait_for(
    what: str,
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    log: Path,
    every: float = 0.2,
) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            pytest.fail(
                f"the run exited ({proc.returncode}) before {what}: {log.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {RUN_TIMEOUT_S:.0f} s: {log.read_text()[-3000:]}")
        time.sleep(every)


def _finish(proc: subprocess.Popen[bytes], log: Path) -> None:
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the run did not end within {RUN_TIMEOUT_S:.0f} s: {log.read_text()[-3000:]}")
    assert code == 0, log.read_text()[-3000:]


def _records(out: Path, name: str) -> list[dict[str, Any]]:
    path = out / name
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _exactly_once(out: Path, items: int = ITEMS) -> list[dict[str, Any]]:
    """Every one of ``items`` records, once, none failed; and a summary that says so."""
    records = _records(out, "trajectories.jsonl")
    assert _records(out, "failed.jsonl") == []
    ids = sorted(record["id"] for record in records)
    assert len(ids) == items
    assert len(set(ids)) == items, f"an item written twice: {ids}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    return records


def _host_dirs(out: Path) -> list[Path]:
    """The run's host directories on the nodes (one machine: one bwrap root for all)."""
    return sorted(Path(default_root_dir("bwrap")).glob(f"{pool_name(str(out))}--*"))


def _actors() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        command = " ".join(proc.info["cmdline"] or [])
        if ACTOR in command:
            found.append(proc)
    return found


def actor_nodes(cluster: Any) -> set[str]:
    """The nodes of ``cluster`` that run a sandbox host actor now."""
    return {node for actor in _actors() if (node := cluster.node_of(actor.pid)) is not None}


def _leftovers(hosts: list[Path]) -> list[str]:
    """Host actors, and processes or mounts under ``hosts``, anywhere on this machine."""
    prefixes = tuple(str(host) for host in hosts)
    found = [f"actor {proc.pid}" for proc in _actors()]
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        command = " ".join(proc.info["cmdline"] or [])
        if prefixes and (
            any(p in command for p in prefixes) or str(proc.info["cwd"]).startswith(prefixes)
        ):
            found.append(f"process {proc.pid}: {command[:160]}")
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split()[4] for line in f]
    found += [f"mount {m}" for m in mounts if prefixes and m.startswith(prefixes)]
    return found


def _left_after(hosts: list[Path], seconds: float) -> list[str]:
    """What :func:`_leftovers` and the host directories still show after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := _leftovers(hosts) + [f"directory {h}" for h in hosts if h.exists()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    return left


def _host_nodes(cluster: Any, out: Path) -> dict[Path, str]:
    """Each host directory of the run and the node its actor (the owner it records) runs on."""
    return {host: node for host in _host_dirs(out) if (node := _node_of_host(cluster, host))}


def _node_of_host(cluster: Any, host: Path) -> str | None:
    """The node the actor of ``host`` (the owner it records) runs on, once it has recorded it."""
    try:
        owner = json.loads((host / "owner.json").read_text())
    except (OSError, ValueError):
        return None  # being created
    return cluster.node_of(int(owner["pid"]))


def _workspace(slot: Path) -> tuple[int, ...] | None:
    """Which workspace ``slot`` holds a rollout's files in, and their last change (inode and
    ctime; each reset recreates it), or ``None`` while it holds none (not set up, or reset)."""
    workspace = slot / "workspace"
    try:
        info = workspace.stat()
        return (info.st_dev, info.st_ino, info.st_ctime_ns) if any(workspace.iterdir()) else None
    except OSError:
        return None  # being reset


def test_a_killed_driver_leaves_nothing_on_the_nodes_and_the_resumed_run_finishes(
    ray_cluster: Any, tmp_path: Path
) -> None:
    out, log = tmp_path / "run", tmp_path / "run.log"
    # the second host starts late (a cold Ray worker); in one CI run the 8 items of the first
    # host were all written before it came up: enough items that the kill finds both
    items = 2 * ITEMS
    proc = _start(_command(ray_cluster, out, hosts=2, items=items), log)

    def on_both_nodes() -> bool:
        nodes = set(_host_nodes(ray_cluster, out).values())
        done = len(_records(out, "trajectories.jsonl"))
        return nodes == set(ray_cluster.raylets()) and 1 <= done < items

    _wait_for("hosts on both nodes and a record", on_both_nodes, proc, log)
    hosts = _host_dirs(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    left = _left_after(hosts, REAPED_WITHIN_S)
    assert left == [], "the dead driver's actors or what they held on the nodes are still there"

    resumed = _start([*_command(ray_cluster, out, hosts=2, items=items), "--resume"], log)
    _finish(resumed, log)
    _exactly_once(out, items)
    # Ray ends a finished driver's actors after it exits, as it does a killed one's
    assert _left_after(sorted({*hosts, *_host_dirs(out)}), REAPED_WITHIN_S) == []


def test_a_node_killed_mid_run_has_its_rollouts_retried_and_each_item_written_once(
    ray_cluster: Any, tmp_path: Path
) -> None:
    doomed = ray_cluster.add_node()
    out, log = tmp_path / "run", tmp_path / "run.log"
    # The hosts past the first start late (a cold Ray worker each: ~18 s after the first
    # here); enough items that the added node's host still gets rollouts.
    items = 2 * ITEMS
    proc = _start(_command(ray_cluster, out, hosts=4, items=items), log)

    nodes: dict[Path, str] = {}
    seen: dict[Path, tuple[int, ...] | None] = {}

    def rollout_begun_on_doomed() -> bool:
        """A slot on the added node has a workspace set up since the last look (empty then, or
        another one: a reset recreates it, a setup writes it). Its rollout has the agent and
        the verifier ahead of it, both needing the node; a slot merely in use may be past its
        verifier, in the reset that ends it."""
        begun = False
        for host in _host_dirs(out):
            if host not in nodes and (node := _node_of_host(ray_cluster, host)) is not None:
                nodes[host] = node
            for slot in host.glob("slots/*") if nodes.get(host) == doomed else ():
                now = _workspace(slot)
                begun |= now is not None and slot in seen and seen[slot] != now
                seen[slot] = now
        return begun

    _wait_for("a rollout begun on the added node", rollout_begun_on_doomed, proc, log, every=0.05)
    ray_cluster.kill_node(doomed)
    _finish(proc, log)
    records = _exactly_once(out, items)
    retried = [r["id"] for r in records if r["metadata"]["attempts"] > 1]
    assert retried, "no rollout was retried after its node was killed"
    assert "failed (infrastructure)" in log.read_text()
    _wait_until_dead(ray_cluster, doomed)


def _wait_until_dead(cluster: Any, node: str) -> None:
    """Wait for the cluster to mark ``node`` dead (its health checks fail; not at once), so
    the next test is not placed on it."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(address=cluster.address, log_to_driver=False)
    deadline = time.monotonic() + NODE_DEATH_S
    while any(n["NodeID"] == node and n["Alive"] for n in ray.nodes()):
        assert time.monotonic() < deadline, (
            f"node {node} still alive {NODE_DEATH_S} s after its kill"
        )
        time.sleep(0.5)


def test_the_atropos_environment_runs_its_sandboxes_on_ray(
    ray_cluster: Any, tmp_path: Path
) -> None:
    out, log = tmp_path / "groups.jsonl", tmp_path / "process.log"
    command = [
        sys.executable, str(ATROPOS_APP), "process",
        "--env.environment", "endless_terminals",
        "--env.tool_pool_mode", "ray",
        "--env.ray_address", ray_cluster.address,
        "--env.ray_python", ray_cluster.python,
        "--env.total_steps", "1",
        "--env.group_size", "2",
        "--env.max_agent_turns", "2",
        "--env.max_tokens_per_turn", "24",
        "--env.max_token_length", "2048",
        "--env.use_wandb", "false",
        "--env.data_path_to_save_groups", str(out),
    ]  # fmt: skip
    proc = _start(command, log)
    nodes: set[str] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        nodes |= actor_nodes(ray_cluster)
        time.sleep(0.2)
    _finish(proc, log)
    assert nodes, "no sandbox host actor ran on the cluster"
    assert nodes <= set(ray_cluster.raylets())
    [group] = _records(tmp_path, out.name)
    assert len(group["tokens"]) == 2
    assert _actors() == []
