"""Conformance-suite backends of the cluster side: remote server, modal fake, nomad fake, docker.

``cluster_cases(BackendCase)`` returns the entries the conftest adds to ``BACKENDS`` (this file
is loaded by path: test folders are not packages). Each factory gets the test's scratch root
and the session's :class:`SharedCluster`, and leaves nothing behind on exit:

- ``remote-server``: four sandbox servers (bwrap inside, 25 slots each) on loopback, started
  once per session; after each test every slot workspace must be empty again.
- ``modal-fake``: the modal backend over the signature-checked fake SDK (local processes, so
  not isolated).
- ``nomad-fake``: the nomad backend over one fake Nomad API per session whose allocations are
  real ``hermes-sandbox serve`` processes (bwrap inside), prewarmed for the tasks the
  conformance tests register (see ``FakeNomad.prewarm``); after each test the pool's job must be
  purged and every slot workspace empty.
- ``docker``: real containers, skipped with the reason when no daemon answers.
- ``gvisor``: real gVisor sandboxes (runsc and rootfs from ``.ci/gvisor.sh``), skipped with the
  reason when they are missing.
- ``ray``: hosts as actors on the session's live two-node Ray cluster (the root conftest's
  ``ray_cluster``), bwrap inside each; skipped when Ray is not installed.

The shared servers and the fake Nomad run in a blocking portal (their own event loop thread),
so they outlive each test's event loop; the session fixture checks that stopping them leaves
no process, cgroup or directory behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import psutil
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hermes_sandbox import BwrapBackend, BwrapConfig, HostBackend
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for
from hermes_sandbox.backends.docker import DockerBackend, DockerConfig, docker_available
from hermes_sandbox.backends.gvisor import GvisorBackend, GvisorConfig
from hermes_sandbox.backends.modal import ModalBackend, ModalConfig
from hermes_sandbox.backends.nomad import NomadBackend, NomadConfig, job_payload
from hermes_sandbox.backends.remote import RemoteBackend, RemoteConfig
from hermes_sandbox.server import ServerConfig, running_server

TOKEN = "conformance-token"
SERVERS = 4
SLOTS_PER_SERVER = 25
NOMAD_SERVER_TOKEN = "conformance-nomad-server-token"
NOMAD_WARM = {1: 1, 2: 1, 25: 4}
"""Prewarmed servers per slot count: the conformance pools use 1, 2 and 4 x 25 slots."""


def load_helper(filename: str) -> ModuleType:
    """Import a sibling helper file by path (test folders are not packages)."""
    path = Path(__file__).with_name(filename)
    spec = importlib.util.spec_from_file_location(f"hermes_sandbox_tests_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _rmtree(path: Path) -> None:
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))


def _nomad_config(url: str) -> NomadConfig:
    return NomadConfig(
        address=url,
        driver="raw_exec",
        command=str(Path(sys.executable).with_name("hermes-sandbox")),
        server_token=NOMAD_SERVER_TOKEN,
        poll_interval_s=0.05,
        start_timeout_s=120.0,
    )


def _slot_dirs(root: Path) -> list[Path]:
    return [p for p in root.glob("**/hosts/*/slots/*") if p.is_dir()]


class SharedCluster:
    """Sandbox servers and a fake Nomad started once per test session, in a portal thread."""

    def __init__(self, root: Path, portal: BlockingPortal, stack: contextlib.ExitStack) -> None:
        self.root = root
        self._portal = portal
        self._stack = stack
        self.urls: list[str] = []
        self.nomad: Any = None
        self.nomad_url = ""

    def start(self) -> None:
        data = self.root / "servers"
        for i in range(SERVERS):
            backend = BwrapBackend(BwrapConfig(root_dir=str(data / str(i) / "hosts")))
            config = ServerConfig(slots=SLOTS_PER_SERVER, data_dir=str(data / str(i)), token=TOKEN)
            server = running_server(config, backend)
            self.urls.append(
                self._stack.enter_context(self._portal.wrap_async_context_manager(server))
            )
        self.nomad = load_helper("test_nomad_fake_api.py").FakeNomad(self.root / "nomad")
        serve = self._portal.wrap_async_context_manager(self.nomad.serve())
        self.nomad_url = self._stack.enter_context(serve)
        config = _nomad_config(self.nomad_url)
        for slots, count in NOMAD_WARM.items():
            task = job_payload(config, "warm", "warm", slots, NOMAD_SERVER_TOKEN)
            self._portal.call(self.nomad.prewarm, task["Job"]["TaskGroups"][0]["Tasks"][0], count)

    async def nomad_state(self) -> tuple[list[str], int]:
        """(names of allocations desired running, processes serving allocations)."""

        def read() -> tuple[list[str], int]:
            return self.nomad.live_allocations(), self.nomad.running_processes()

        return await anyio.to_thread.run_sync(self._portal.call, read)

    def server_roots(self) -> list[str]:
        return [str(self.root / "servers" / str(i) / "hosts") for i in range(SERVERS)]

    def dirty_workspaces(self) -> list[str]:
        """Slot directories of the shared servers whose workspace, ``/tmp`` or ``/dev/shm``
        is not empty (a reset recreates them empty)."""
        return [
            str(p)
            for p in _slot_dirs(self.root)
            if any(any(sub.iterdir()) for sub in p.iterdir() if sub.is_dir())
        ]

    async def check_clean(self, what: str) -> None:
        dirty = await anyio.to_thread.run_sync(self.dirty_workspaces)
        assert dirty == [], f"{what}: slot workspaces not reset: {dirty[:5]}"


@contextlib.contextmanager
def shared_cluster(parent: Path) -> Iterator[SharedCluster]:
    """Start the session's servers and fake Nomad; on exit check they left nothing behind."""
    root = parent / f"shared-{uuid.uuid4().hex[:8]}"
    root.mkdir(mode=0o755)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        with start_blocking_portal() as portal, contextlib.ExitStack() as stack:
            cluster = SharedCluster(root, portal, stack)
            cluster.start()
            yield cluster
        left = {p.pid for p in psutil.Process().children(recursive=True)} - before
        assert [pid for pid in left if psutil.pid_exists(pid)] == [], "servers left running"
        assert _slot_dirs(root) == [], "server workspaces left behind"
        cgroups = [
            base
            for hosts in cluster.server_roots()
            for base in controller_bases(subtree_for(hosts)).values()
            if os.path.isdir(base)
        ]
        assert cgroups == [], f"cgroups left behind: {cgroups}"
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mounts = [p for p in (line.split()[4] for line in f) if p.startswith(f"{root}/")]
        assert mounts == [], f"workspace mounts left behind: {mounts[:5]}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def remote_servers(root: Path, shared: SharedCluster) -> AsyncIterator[HostBackend]:
    yield RemoteBackend(RemoteConfig(urls=shared.urls, token=TOKEN))
    await shared.check_clean("remote-server")


@contextlib.asynccontextmanager
async def modal_fake(root: Path, shared: SharedCluster) -> AsyncIterator[HostBackend]:
    fake = load_helper("test_modal_fake_sdk.py").FakeModal()
    config = ModalConfig(workspace_root=str(root / "modal" / "{host_id}"))
    try:
        yield ModalBackend(config, sdk=fake.sdk())
    finally:
        for sandbox in list(fake.live.values()):
            await sandbox.terminate.aio()
        await _rmtree(root / "modal")


@contextlib.asynccontextmanager
async def nomad_fake(root: Path, shared: SharedCluster) -> AsyncIterator[HostBackend]:
    backend = NomadBackend(_nomad_config(shared.nomad_url))
    try:
        yield backend
        live, serving = await shared.nomad_state()
    finally:
        await backend.aclose()
    assert live == [], f"allocations still running after the pool closed: {live}"
    assert serving == 0, "allocation processes still serving after the pool closed"
    await shared.check_clean("nomad-fake")


DOCKER_BASE_IMAGE = "hermes-sandbox-base:bookworm-minbase"
"""Built offline (debootstrap + docker import) by ``.ci/docker.sh``."""


@contextlib.asynccontextmanager
async def docker(root: Path, shared: SharedCluster) -> AsyncIterator[HostBackend]:
    yield DockerBackend(DockerConfig(image=DOCKER_BASE_IMAGE, root_dir=str(root)))


def _docker_skip() -> str | None:
    reason = anyio.run(docker_available)
    if reason:
        return f"docker: {reason}"
    found = subprocess.run(
        ["docker", "image", "inspect", DOCKER_BASE_IMAGE], capture_output=True, check=False
    )
    if found.returncode != 0:
        return f"docker: image {DOCKER_BASE_IMAGE} is missing; run .ci/docker.sh to build it"
    return None


GVISOR_CACHE = Path.home() / ".cache" / "hermes-rl"
"""Where ``.ci/gvisor.sh`` unpacks runsc (bookworm-backports) and the base image's rootfs."""


def gvisor_setup() -> tuple[str, str] | str:
    """``(runsc, rootfs)`` made by ``.ci/gvisor.sh``, or why the gvisor tests cannot run."""
    if os.geteuid() != 0:
        return "gvisor: runsc needs root"
    found = sorted(GVISOR_CACHE.glob("runsc-*/usr/bin/runsc"))
    rootfs = GVISOR_CACHE / "gvisor-rootfs-bookworm-minbase"
    if not found or not (rootfs / "usr" / "bin" / "bash").exists():
        return "gvisor: runsc or its rootfs is missing; run .ci/gvisor.sh"
    return str(found[-1]), str(rootfs)


def gvisor_config(root: Path) -> GvisorConfig:
    setup = gvisor_setup()
    assert not isinstance(setup, str), setup
    runsc, rootfs = setup
    return GvisorConfig(rootfs=rootfs, runsc=runsc, root_dir=str(root))


@contextlib.asynccontextmanager
async def gvisor(root: Path, shared: SharedCluster) -> AsyncIterator[HostBackend]:
    yield GvisorBackend(gvisor_config(root))


def _gvisor_skip() -> str | None:
    setup = gvisor_setup()
    return setup if isinstance(setup, str) else None


@contextlib.asynccontextmanager
async def ray_hosts(root: Path, cluster: Any) -> AsyncIterator[HostBackend]:
    from hermes_sandbox.backends.ray import RayBackend, RayConfig

    config = RayConfig(
        address=cluster.address,
        cpus=RAY_HOST_CPUS,
        python=cluster.python,
        bwrap=BwrapConfig(root_dir=str(root)),
    )
    yield RayBackend(config)


RAY_HOST_CPUS = 0.25
"""Eight hosts fit on a node of the test cluster (two CPUs each)."""


def _ray_skip() -> str | None:
    return None if importlib.util.find_spec("ray") else "ray: not installed (the ray extra)"


def cluster_cases(case: Callable[..., Any]) -> dict[str, Any]:
    """The cluster backends as ``BackendCase`` entries (``case`` is the conftest's class)."""
    unprivileged_local = os.geteuid() != 0
    return {
        "remote-server": case(remote_servers, isolated=True, unprivileged=True, shared=True),
        "modal-fake": case(modal_fake, isolated=False, unprivileged=unprivileged_local),
        "nomad-fake": case(nomad_fake, isolated=True, unprivileged=True, shared=True),
        "docker": case(
            docker, isolated=True, unprivileged=True, skip_reason=_docker_skip, slow=True
        ),
        # a gVisor slot is a whole sandbox: 3-4% of a core each while idle and seconds of CPU to
        # start, so 100 at once took 400 s alone on 2 cores and, beside a CI worker, overran
        # every timeout; 20 still fill 4 hosts at once
        "gvisor": case(
            gvisor,
            isolated=True,
            unprivileged=True,
            skip_reason=_gvisor_skip,
            slow=True,
            slots_at_once=20,
        ),
        "ray": case(
            ray_hosts,
            isolated=True,
            unprivileged=True,
            skip_reason=_ray_skip,
            cluster_fixture="ray_cluster",
        ),
    }


def test_cases_are_well_formed() -> None:
    cases = cluster_cases(lambda make, **kw: (make, kw))
    assert set(cases) == {"remote-server", "modal-fake", "nomad-fake", "docker", "gvisor", "ray"}
    assert all(callable(make) for make, _ in cases.values())
