"""Every shipped environment on every sandbox backend it claims, end to end (issue 23).

For each (environment, backend) pair a scripted oracle agent (the item's oracle solution through
the real ``terminal`` tool) scores 1.0 and a do-nothing agent 0.0, with the environment built
by the registry and the pool by the factory as the apps build them: ``endless_terminals`` on
bwrap, local, docker and remote (the project's sandbox server, bwrap inside, on loopback);
``swe_smith_oracle`` on bwrap and docker; ``terminal_bench`` on docker (each task in its own
image, built from its ``environment/`` Dockerfile) and on bwrap (host userland). Docker runs
the tasks image of ``.ci/docker-tasks.sh``, with the tasks' ``FROM`` images aliased to it.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from hermes_envs import RolloutRunner, RunnerConfig, default_registry
from hermes_protocols import Environment, FailureKind, Item
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import POOL_LABEL, docker_available
from hermes_sandbox.factory import SandboxSpec, build_backend
from hermes_sandbox.server import ServerConfig, running_server
from hermes_sandbox.tools import default_toolsets

from .test_envs_on_bwrap import IdleAgent, OracleAgent

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TASKS_IMAGE = "hermes-sandbox-tasks:bookworm-v1"
#: the samples' FROM images, on a Docker host that cannot pull them
ALIASES = {"ubuntu:24.04": TASKS_IMAGE, "python:3.11-slim": TASKS_IMAGE}
TOKEN = "env-backends-token"
CONFIG = RunnerConfig(max_attempts=1, retry_delay_s=0.0)


def _docker_reason() -> str | None:
    reason = anyio.run(docker_available)
    if reason is None:
        found = subprocess.run(["docker", "image", "inspect", TASKS_IMAGE], capture_output=True)
        if found.returncode != 0:
            reason = f"image {TASKS_IMAGE} is missing; run .ci/docker.sh to build it"
    return reason


NO_DOCKER = _docker_reason()
#: (environment, options, items to run, backend)
PAIRS = [
    *(
        ("endless_terminals", {"families": ["python_fix", "git_commit"]}, 2, kind)
        for kind in ("bwrap", "local", "docker", "remote")
    ),
    *(("swe_smith_oracle", {}, 1, kind) for kind in ("bwrap", "docker")),
    ("terminal_bench", {}, 3, "docker"),
    ("terminal_bench", {}, 1, "bwrap"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    root = Path("/tmp") / f"hermes-env-backends-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _containers(pool: str) -> list[str]:
    args = ["docker", "ps", "-aq", "--filter", f"label={POOL_LABEL}={pool}"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()


async def _spec(kind: str, scratch: Path, stack: AsyncExitStack) -> SandboxSpec:
    if kind == "docker":
        if NO_DOCKER is not None:
            pytest.skip(f"docker: {NO_DOCKER}")
        return SandboxSpec(kind="docker", image=TASKS_IMAGE, image_aliases=ALIASES)
    if kind == "remote":
        data = scratch / f"server-{uuid.uuid4().hex[:6]}"
        server = BwrapBackend(BwrapConfig(root_dir=str(data / "hosts")))
        config = ServerConfig(slots=2, data_dir=str(data), token=TOKEN)
        url = await stack.enter_async_context(running_server(config, server))
        return SandboxSpec(kind="remote", urls=(url,), token=TOKEN)
    return SandboxSpec(kind=kind)  # type: ignore[arg-type]


@pytest.fixture
async def make_pool(scratch: Path) -> AsyncIterator[Any]:
    """``make_pool(kind)``: a started pool of that backend; afterwards no container is left."""
    names: list[str] = []
    async with AsyncExitStack() as stack:

        async def make(kind: str) -> SandboxPool:
            spec = await _spec(kind, scratch, stack)
            names.append(f"envs-{kind}-{uuid.uuid4().hex[:8]}")
            pool = SandboxPool(
                build_backend(spec), PoolConfig(name=names[-1], slots_per_host=2, max_hosts=1)
            )
            return await stack.enter_async_context(pool)

        yield make
    if NO_DOCKER is None:
        assert [c for name in names for c in _containers(name)] == []


def _environment(name: str, options: dict[str, Any], scratch: Path) -> Environment:
    if name == "swe_smith_oracle":
        options = {**options, "cache_dir": str(scratch / "swe-cache")}
    return default_registry().create(name, options)


async def _scores(env: Environment, item: Item, pool: SandboxPool) -> list[Any]:
    toolsets = list(default_toolsets().values())
    oracle = OracleAgent(env.oracle_solution(item))  # type: ignore[attr-defined]
    solved = await RolloutRunner(env, pool, oracle, toolsets, config=CONFIG).run_rollout(
        item, toolsets
    )
    idle = await RolloutRunner(env, pool, IdleAgent(), toolsets, config=CONFIG).run_rollout(
        item, toolsets
    )
    return [solved, idle, oracle.output]


@pytest.mark.parametrize(
    ("name", "options", "count", "kind"), PAIRS, ids=[f"{p[0]}-{p[3]}" for p in PAIRS]
)
async def test_oracle_scores_one_and_doing_nothing_zero(
    name: str, options: dict[str, Any], count: int, kind: str, make_pool: Any, scratch: Path
) -> None:
    pool = await make_pool(kind)
    env = _environment(name, options, scratch)
    for item in list(_take(env.items(seed=0), count)):
        solved, idle, output = await _scores(env, item, pool)
        assert solved.score is not None, (item.id, solved.failure)
        assert solved.score.reward == 1.0, (item.id, solved.score.details, output[-2000:])
        assert idle.score is not None, (item.id, idle.failure)
        assert idle.score.reward == 0.0, (item.id, idle.score.details)
        assert idle.score.failure is FailureKind.MODEL
        if name == "terminal_bench":  # each task in its own image on docker, host userland else
            workspace = solved.metadata["workspace"]
            assert workspace["host_userland"] is (kind != "docker"), workspace
            assert workspace["image"] == "environment/Dockerfile"


def _take(items: Iterator[Item], count: int) -> Iterator[Item]:
    for _, item in zip(range(count), items, strict=False):
        yield item
