"""Shared fixtures of the hermes-sandbox tests.

``BACKENDS`` is the list of backends the conformance suite runs against: a dict from a name to
a :class:`BackendCase` whose ``make`` is an async context manager factory yielding a started
``HostBackend`` (given a scratch directory and, for ``shared`` cases, the session's
``SharedCluster`` of sandbox servers and fake Nomad, else ``None``). Add a backend by adding an
entry; set ``skip_reason`` to skip it where it cannot run (e.g. no Docker daemon).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import psutil
import pytest
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    HostBackend,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    SandboxPool,
)
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for

SCRATCH_PARENT = Path("/tmp/hermes-sandbox-tests")

MakeBackend = Callable[[Path, Any], contextlib.AbstractAsyncContextManager[HostBackend]]


@attrs.frozen
class BackendCase:
    """One backend of the conformance suite and what it promises."""

    make: MakeBackend
    isolated: bool
    """Commands cannot see other slots, the host's home, or the network."""
    unprivileged: bool
    """Commands do not run as root (file permissions bind)."""
    confined_exec_cwd: bool = True
    """``exec(cwd=...)`` outside the workspace raises ``WorkspaceEscape``."""
    skip_reason: Callable[[], str | None] = lambda: None
    shared: bool = False
    """Uses the session's ``shared_cluster`` (servers started once, checked after each test)."""
    slow: bool = False
    """Starts a server, a container or a VM: the ``slow`` tier (``shared`` cases are too)."""
    slots_at_once: int = 100
    """Slots the scale test holds at once, on 4 hosts."""
    cluster_fixture: str | None = None
    """A session fixture of the root conftest (a live cluster) passed to ``make`` instead of
    the shared cluster; such cases are ``slow`` and ``heavy``."""


@contextlib.asynccontextmanager
async def _local(root: Path, _: object) -> AsyncIterator[HostBackend]:
    yield LocalBackend(LocalConfig(root_dir=str(root)))


@contextlib.asynccontextmanager
async def _bwrap(root: Path, _: object) -> AsyncIterator[HostBackend]:
    yield BwrapBackend(BwrapConfig(root_dir=str(root)))


BACKENDS: dict[str, BackendCase] = {
    "local": BackendCase(_local, isolated=False, unprivileged=os.geteuid() != 0),
    "bwrap": BackendCase(_bwrap, isolated=True, unprivileged=True),
}


# --- cluster backends: remote server, modal fake, nomad fake, docker, gvisor. ------------------
# Defined in test_server_cluster_cases.py, loaded by path (test folders are not packages).
def _cluster_module() -> Any:
    import importlib.util

    path = Path(__file__).with_name("test_server_cluster_cases.py")
    spec = importlib.util.spec_from_file_location("hermes_sandbox_cluster_cases", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CLUSTER = _cluster_module()
BACKENDS.update(_CLUSTER.cluster_cases(BackendCase))
# --- end of cluster backends ------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _leftover_processes(token: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(token in part for part in proc.info["cmdline"] or []):
                found.append(proc.pid)
    return found


def _cgroups(root: Path) -> list[str]:
    """cgroup directories of bwrap backends rooted at ``root`` (see ``backends/cgroups.py``)."""
    return [
        base for base in controller_bases(subtree_for(str(root))).values() if os.path.isdir(base)
    ]


def _mounts(root: Path) -> list[str]:
    """Mount points under a test's scratch ``root`` (other tests, other pytest-xdist workers
    and the session's shared cluster mount slot workspaces elsewhere, at the same time)."""
    prefix = f"{root}/"
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return sorted(p for p in (line.split()[4] for line in f) if p.startswith(prefix))


T = TypeVar("T")


def _settled(probe: Callable[[], list[T]], seconds: float = 5.0) -> list[T]:
    """``probe()`` once it is empty, or what it still finds after ``seconds`` (a process that
    was just killed, or a mount the kernel is still taking down, is not a leak)."""
    deadline = time.monotonic() + seconds
    found = probe()
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = probe()
    return found


def _live_children(before: set[int]) -> list[int]:
    """Descendants of this process that did not exist before and are not zombies."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child.pid)
    return sorted(alive)


def _describe(pids: list[int]) -> list[str]:
    described = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            described.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:200]}")
    return described


@pytest.fixture
def sandbox_root() -> Iterator[Path]:
    """A scratch directory slot uids can traverse; the test fails if anything is left in it."""
    SCRATCH_PARENT.mkdir(mode=0o755, exist_ok=True)
    SCRATCH_PARENT.chmod(0o755)
    root = SCRATCH_PARENT / uuid.uuid4().hex[:10]
    root.mkdir(mode=0o755)
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    yield root
    try:
        # .bin holds the reachable bwrap copy and the seccomp program: a cache, kept on purpose;
        # .runsc is gVisor's state directory, empty once every sandbox is gone.
        state = root / ".runsc"
        left = sorted(p.name for p in root.iterdir() if p.name not in (".bin", ".runsc"))
        left += sorted(f".runsc/{p.name}" for p in state.iterdir()) if state.is_dir() else []
        assert left == [], f"directories left behind: {left}"
        added = _settled(lambda: _mounts(root))
        assert added == [], f"mounts left behind: {added}"
        assert _cgroups(root) == [], f"cgroups left behind: {_cgroups(root)}"
        alive = _settled(lambda: _live_children(children))
        assert alive == [], f"child processes left behind: {_describe(alive)}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def leftover_processes() -> Callable[[str], list[int]]:
    """``leftover_processes(token)``: pids of processes whose command line contains ``token``."""
    return _leftover_processes


@pytest.fixture(scope="session")
def shared_cluster() -> Iterator[Any]:
    """Sandbox servers and a fake Nomad started once for the session (see the cluster cases)."""
    SCRATCH_PARENT.mkdir(mode=0o755, exist_ok=True)
    SCRATCH_PARENT.chmod(0o755)
    with _CLUSTER.shared_cluster(SCRATCH_PARENT) as cluster:
        yield cluster


def _backend_param(name: str) -> Any:
    """Slow backends' tests are marked ``slow``; the shared cluster's share one pytest-xdist
    worker, so a parallel session starts it once; a live cluster's case says which cluster it
    reaches (``request.getfixturevalue`` hides it from the root conftest, which groups it)."""
    case = BACKENDS[name]
    marks = [pytest.mark.slow] if case.slow or case.shared or case.cluster_fixture else []
    if case.cluster_fixture:
        marks.append(pytest.mark.live_cluster(case.cluster_fixture))
    if case.shared:
        marks.append(pytest.mark.xdist_group("shared_cluster"))
    return pytest.param(name, marks=marks)


@pytest.fixture(params=[_backend_param(name) for name in sorted(BACKENDS)])
def backend_case(request: pytest.FixtureRequest) -> BackendCase:
    case = BACKENDS[request.param]
    reason = case.skip_reason()
    if reason:
        pytest.skip(reason)
    if case.shared:  # started before the test's leak checks take their snapshot
        request.getfixturevalue("shared_cluster")
    if case.cluster_fixture:
        request.getfixturevalue(case.cluster_fixture)
    return case


@pytest.fixture
async def host_backend(
    backend_case: BackendCase, sandbox_root: Path, request: pytest.FixtureRequest
) -> AsyncIterator[HostBackend]:
    shared = request.getfixturevalue("shared_cluster") if backend_case.shared else None
    if backend_case.cluster_fixture:
        shared = request.getfixturevalue(backend_case.cluster_fixture)
    async with backend_case.make(sandbox_root, shared) as backend:
        yield backend


@pytest.fixture
def make_pool(host_backend: HostBackend) -> Callable[..., SandboxPool]:
    """``make_pool(**PoolConfig fields)``: a pool over the backend under test."""

    def make(**fields: Any) -> SandboxPool:
        fields.setdefault("name", "t" + uuid.uuid4().hex[:8])
        return SandboxPool(host_backend, PoolConfig(**fields))

    return make
