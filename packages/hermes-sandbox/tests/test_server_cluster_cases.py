"""Conformance-suite backends of the cluster side: remote server, modal fake, nomad fake, docker.

``cluster_cases(BackendCase)`` returns the entries the conftest adds to ``BACKENDS`` (this file
is loaded by path: test folders are not packages). Each factory starts real things under the
scratch root and removes all of it on exit:

- ``remote-server``: four in-process sandbox servers (bwrap inside, 25 slots each) on loopback.
- ``modal-fake``: the modal backend over the signature-checked fake SDK (local processes, so
  not isolated).
- ``nomad-fake``: the nomad backend over the fake Nomad API whose allocations are real
  ``hermes-sandbox serve`` processes (bwrap inside).
- ``docker``: real containers, skipped with the reason when no daemon answers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from hermes_sandbox import BwrapBackend, BwrapConfig, HostBackend
from hermes_sandbox.backends.docker import DockerBackend, DockerConfig, docker_available
from hermes_sandbox.backends.modal import ModalBackend, ModalConfig
from hermes_sandbox.backends.nomad import NomadBackend, NomadConfig
from hermes_sandbox.backends.remote import RemoteBackend, RemoteConfig
from hermes_sandbox.server import ServerConfig, running_server

TOKEN = "conformance-token"
SERVERS = 4
SLOTS_PER_SERVER = 25


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


@contextlib.asynccontextmanager
async def remote_servers(root: Path) -> AsyncIterator[HostBackend]:
    data = root / "servers"
    try:
        async with contextlib.AsyncExitStack() as stack:
            urls = []
            for i in range(SERVERS):
                backend = BwrapBackend(BwrapConfig(root_dir=str(data / str(i) / "hosts")))
                config = ServerConfig(
                    slots=SLOTS_PER_SERVER, data_dir=str(data / str(i)), token=TOKEN
                )
                urls.append(await stack.enter_async_context(running_server(config, backend)))
            yield RemoteBackend(RemoteConfig(urls=urls, token=TOKEN))
    finally:
        await _rmtree(data)


@contextlib.asynccontextmanager
async def modal_fake(root: Path) -> AsyncIterator[HostBackend]:
    fake = load_helper("test_modal_fake_sdk.py").FakeModal()
    config = ModalConfig(workspace_root=str(root / "modal" / "{host_id}"))
    try:
        yield ModalBackend(config, sdk=fake.sdk())
    finally:
        for sandbox in list(fake.live.values()):
            await sandbox.terminate.aio()
        await _rmtree(root / "modal")


@contextlib.asynccontextmanager
async def nomad_fake(root: Path) -> AsyncIterator[HostBackend]:
    fake = load_helper("test_nomad_fake_api.py").FakeNomad(root / "nomad")
    try:
        async with fake.serve() as url:
            backend = NomadBackend(
                NomadConfig(
                    address=url,
                    driver="raw_exec",
                    command=str(Path(sys.executable).with_name("hermes-sandbox")),
                    poll_interval_s=0.1,
                    start_timeout_s=120.0,
                )
            )
            try:
                yield backend
            finally:
                await backend.aclose()
    finally:
        await _rmtree(root / "nomad")


@contextlib.asynccontextmanager
async def docker(root: Path) -> AsyncIterator[HostBackend]:
    yield DockerBackend(DockerConfig())


def _docker_skip() -> str | None:
    reason = anyio.run(docker_available)
    return f"docker: {reason}" if reason else None


def cluster_cases(case: Callable[..., Any]) -> dict[str, Any]:
    """The cluster backends as ``BackendCase`` entries (``case`` is the conftest's class)."""
    unprivileged_local = os.geteuid() != 0
    return {
        "remote-server": case(remote_servers, isolated=True, unprivileged=True),
        "modal-fake": case(modal_fake, isolated=False, unprivileged=unprivileged_local),
        "nomad-fake": case(nomad_fake, isolated=True, unprivileged=True),
        "docker": case(docker, isolated=False, unprivileged=False, skip_reason=_docker_skip),
    }


def test_cases_are_well_formed() -> None:
    cases = cluster_cases(lambda make, **kw: (make, kw))
    assert set(cases) == {"remote-server", "modal-fake", "nomad-fake", "docker"}
    assert all(callable(make) for make, _ in cases.values())
