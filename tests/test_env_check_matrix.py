"""The environment check for every (shipped environment, backend it claims) pair, and for the
example plugin (issue 23): ``endless_terminals`` on bwrap, local, docker and remote (the
project's sandbox server as users start it, ``hermes-sandbox serve``); ``swe_smith_oracle`` on
bwrap and docker; ``terminal_bench`` on docker (each task in its own image) and on bwrap (host
userland); ``examples/sales_report`` (loaded from its file) on bwrap.

Two items per pair. Docker pairs need the daemon and the tasks image ``.ci/docker.sh`` builds
(the generic hosts run it; the samples' ``FROM`` images are aliased to it, offline).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hermes_rollouts import check_environment
from hermes_sandbox.backends.docker import docker_available
from hermes_sandbox.factory import SandboxSpec

from tests.processes import background_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/sales_report/src/hermes_sales_report/__init__.py:SalesReportEnv"
TASKS_IMAGE = "hermes-sandbox-tasks:bookworm-v1"
TOKEN = "env-check-matrix-token"
#: the tasks' FROM images, on a Docker host that cannot pull them
ALIASES = {"ubuntu:24.04": TASKS_IMAGE, "python:3.11-slim": TASKS_IMAGE}

#: (environment, backend, docker image)
PAIRS = [
    pytest.param("endless_terminals", "bwrap", None, id="endless_terminals-bwrap"),
    pytest.param("endless_terminals", "local", None, id="endless_terminals-local"),
    pytest.param("endless_terminals", "docker", TASKS_IMAGE, id="endless_terminals-docker"),
    pytest.param("endless_terminals", "remote", None, id="endless_terminals-remote"),
    pytest.param("swe_smith_oracle", "bwrap", None, id="swe_smith_oracle-bwrap"),
    pytest.param("swe_smith_oracle", "docker", TASKS_IMAGE, id="swe_smith_oracle-docker"),
    pytest.param("terminal_bench", "docker", TASKS_IMAGE, id="terminal_bench-docker"),
    pytest.param("terminal_bench", "bwrap", None, id="terminal_bench-bwrap"),
    pytest.param(str(EXAMPLE), "bwrap", None, id="example_sales_report-bwrap"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _image_missing(image: str) -> str | None:
    reason = anyio.run(docker_available)
    if reason is not None:
        return f"no Docker daemon: {reason}"
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    return None if found.returncode == 0 else f"image {image} is missing: run .ci/docker.sh"


@pytest.fixture(scope="module")
def sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``hermes-sandbox serve`` (bwrap inside) on loopback, as a user starts it."""
    data = Path("/tmp") / f"hermes-check-server-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("server") / "server.log"
    script = Path(sys.executable).parent / "hermes-sandbox"
    cmd = [str(script), "serve", "--port", "0", "--slots", "4", "--data-dir", str(data)]
    env = {**os.environ, "HERMES_SANDBOX_TOKEN": TOKEN}
    with background_process(cmd, cwd=ROOT, env=env, log=log):
        url = _wait_for_url(log)
        yield url
    shutil.rmtree(data, ignore_errors=True)


def _wait_for_url(log: Path, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("hermes-sandbox serving on "):
                return line.rsplit(" ", 1)[1]
        time.sleep(0.2)
    raise AssertionError(f"the sandbox server did not start: {log.read_text()[-2000:]}")


@pytest.mark.parametrize(("environment", "kind", "image"), PAIRS)
async def test_the_environment_check_passes(
    environment: str, kind: str, image: str | None, request: pytest.FixtureRequest
) -> None:
    if image is not None:
        reason = await anyio.to_thread.run_sync(_image_missing, image)
        if reason is not None:
            pytest.skip(reason)
    aliases = ALIASES if kind == "docker" else {}
    spec = SandboxSpec(kind=kind, image=image, image_aliases=aliases)  # type: ignore[arg-type]
    if kind == "remote":
        url = request.getfixturevalue("sandbox_server")
        spec = SandboxSpec(kind="remote", urls=(url,), token=TOKEN)
    report = await check_environment(environment, sandbox=spec, items=2)
    print(report.table())
    assert report.passed, report.table()
    if environment == "terminal_bench":  # each task in its own image on docker
        workspaces = [r["metadata"]["workspace"] for r in report.records]
        assert len(workspaces) == 4
        assert all(w["host_userland"] is (kind != "docker") for w in workspaces), workspaces
