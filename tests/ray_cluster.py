"""A live two-node Ray cluster on this machine, for the ray sandbox backend's tests.

``ray start --head`` (its own temp dir, a free port, two CPUs, a 200 MB object store, no
dashboard, no usage stats) and a second ``ray start --address`` node: two raylets, each with
its own workers, the way a real multi-node cluster runs (only the machine is shared).
:func:`ray_cluster` stops both however the tests end, killing exactly the processes of this
cluster (found by its temp dir, and their descendants), and checks none is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import psutil

NODE_CPUS = 2
OBJECT_STORE_BYTES = 200_000_000
#: how long a node may take to start and register (a loaded CI machine takes minutes)
START_TIMEOUT_S = 180.0
#: CPUs each sandbox host reserves in the tests (eight hosts fit on a node)
HOST_CPUS = 0.25


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


_COMMON = [
    f"--num-cpus={NODE_CPUS}",
    "--num-gpus=0",
    f"--object-store-memory={OBJECT_STORE_BYTES}",
    "--disable-usage-stats",
    "--node-ip-address=127.0.0.1",
]


@attrs.frozen
class RayCluster:
    """The cluster's address, its temp dir, and the Python its workers run (this one)."""

    address: str
    temp_dir: Path
    python: str = sys.executable

    def add_node(self) -> str:
        """Start one more worker node; its node id."""
        before = set(self.raylets())
        _start(
            [f"--address={self.address}", *_COMMON, f"--temp-dir={self.temp_dir}"], self.temp_dir
        )
        [added] = set(self.raylets()) - before
        return added

    def raylets(self) -> dict[str, int]:
        """The pid of every running raylet of this cluster, by node id."""
        found = {}
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                cmdline = proc.cmdline()
                if cmdline and cmdline[0].endswith("/raylet"):
                    flag = next(a for a in cmdline if a.startswith("--node_id="))
                    found[flag.partition("=")[2]] = int(proc.pid)
        return found

    def node_of(self, pid: int) -> str | None:
        """The node whose raylet started process ``pid`` (a worker, an actor), if any."""
        by_pid = {raylet: node for node, raylet in self.raylets().items()}
        with contextlib.suppress(psutil.Error):
            for parent in psutil.Process(pid).parents():
                if parent.pid in by_pid:
                    return by_pid[parent.pid]
        return None

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster: those naming its temp dir, and descendants."""
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(str(self.temp_dir) in part for part in proc.info["cmdline"] or []):
                    found[proc.pid] = proc
                    for child in proc.children(recursive=True):
                        found[child.pid] = child
        alive = []
        for proc in found.values():
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
        return alive

    def raylet_pid(self, node_id: str) -> int:
        """The pid of the raylet of node ``node_id`` (killing it loses the node)."""
        pid = self.raylets().get(node_id)
        if pid is None:
            raise LookupError(f"no raylet of node {node_id} is running")
        return pid

    def kill_node(self, node_id: str) -> None:
        """SIGKILL the raylet of ``node_id`` and everything it started (its workers)."""
        raylet = psutil.Process(self.raylet_pid(node_id))
        doomed = [raylet, *raylet.children(recursive=True)]
        for proc in doomed:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(doomed, timeout=10)


def _start(args: list[str], temp_dir: Path) -> None:
    log = temp_dir.with_suffix(".log")
    with log.open("ab") as out:
        done = subprocess.run(
            [_ray_cli(), "start", *args],
            env={**os.environ, "RAY_raylet_start_wait_time_s": str(int(START_TIMEOUT_S))},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=START_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"ray start failed (exit {done.returncode}): {log.read_text()[-2000:]}")


def _stop(cluster: RayCluster) -> list[str]:
    """Kill every process of ``cluster``; what is still alive afterwards."""
    procs = cluster.processes()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=5)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(alive, timeout=10)
    deadline = time.monotonic() + 10
    left = cluster.processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = cluster.processes()
    described = []
    for proc in left:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
    return described


@contextlib.contextmanager
def ray_cluster(head_args: tuple[str, ...] = ()) -> Iterator[RayCluster]:
    """A head and a worker node on this machine; stopped (and checked gone) on exit.
    ``head_args``: more ``ray start`` options of the head (e.g. ``--resources=...``)."""
    # A short path: Ray's unix sockets live under it (108-byte limit).
    temp_dir = Path(tempfile.mkdtemp(prefix="hray-", dir="/tmp"))
    port = _free_port()
    cluster = RayCluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir)
    head = ["--head", f"--port={port}", "--include-dashboard=false", *_COMMON, *head_args]
    left: list[str] = []
    try:
        _start([*head, f"--temp-dir={temp_dir}"], temp_dir)
        cluster.add_node()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()
        left = _stop(cluster)
        shutil.rmtree(temp_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_dir.with_suffix(".log"))
    assert left == [], f"Ray processes left after the cluster stopped: {left}"
