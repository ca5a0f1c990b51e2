"""Items' own images on the docker backend: named, aliased, built from a context, unavailable.

The Dockerfile rewrite and the context tar are checked offline; the rest runs real containers
from the offline base image of ``.ci/docker.sh`` (skipped when no daemon answers).
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
from hermes_protocols import ImageUnavailable, SlotImage
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.backends.docker import POOL_LABEL, DockerBackend, DockerConfig
from hermes_sandbox.backends.docker_images import BUILT_REPOSITORY, context_tar, rewrite_from

from .test_docker_backend import BASE_IMAGE, NO_DAEMON

pytestmark = pytest.mark.anyio
docker = pytest.mark.skipif(NO_DAEMON is not None, reason=f"no Docker daemon: {NO_DAEMON}")
CONTEXT = {
    "Dockerfile": b"FROM ubuntu:24.04\nWORKDIR /app\nCOPY a.txt /app/a.txt\n",
    "a.txt": b"from the build context\n",
}


def test_from_lines_are_rewritten_by_alias_only() -> None:
    dockerfile = (
        "FROM ubuntu:24.04 AS build\nRUN echo FROM ubuntu:24.04\n"
        "from --platform=linux/amd64 python:3.11-slim\nFROM other:1\n"
    )
    aliases = {"ubuntu:24.04": "local:a", "python:3.11-slim": "local:b"}
    assert rewrite_from(dockerfile, aliases) == (
        "FROM local:a AS build\nRUN echo FROM ubuntu:24.04\n"
        "from --platform=linux/amd64 local:b\nFROM other:1\n"
    )


def test_the_context_tar_depends_on_content_only() -> None:
    one = context_tar([("b", b"2"), ("Dockerfile", b"FROM x\n")])
    assert one == context_tar([("Dockerfile", b"FROM x\n"), ("b", b"2")])
    assert one != context_tar([("Dockerfile", b"FROM x\n"), ("b", b"3")])


def _docker(*args: str) -> list[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=True)
    return done.stdout.split()


def _pool(config: DockerConfig) -> tuple[SandboxPool, str]:
    name = f"img-{uuid.uuid4().hex[:8]}"
    return SandboxPool(DockerBackend(config), PoolConfig(name=name, max_hosts=1)), name


@pytest.mark.slow
@docker
async def test_a_built_context_runs_with_its_workspace_at_app_and_is_removed_on_release() -> None:
    before = set(_docker("images", "-q", BUILT_REPOSITORY))
    pool, name = _pool(DockerConfig(image_aliases={"ubuntu:24.04": BASE_IMAGE}))
    async with pool:
        slot = await pool.acquire_image("t", SlotImage(build_context=CONTEXT, workdir="/app"))
        assert slot.workspace == "/app"
        seen = await slot.exec("pwd; ls; cat a.txt", timeout=30)
        assert seen.stdout.splitlines() == ["/app", "a.txt", "from the build context"]
        await slot.write_file("b.txt", b"written")
        assert (await slot.exec("cat /app/b.txt", timeout=30)).stdout == "written"
        assert len(_docker("ps", "-aq", "--filter", f"label={POOL_LABEL}={name}")) == 1
        await pool.release(slot)
        assert _docker("ps", "-aq", "--filter", f"label={POOL_LABEL}={name}") == []
    built = set(_docker("images", "-q", BUILT_REPOSITORY)) - before
    for image in built:  # this test's own build; a later run rebuilds it from the layer cache
        _docker("rmi", "-f", image)


@pytest.mark.slow
@docker
async def test_a_named_image_is_used_as_is_or_through_its_alias() -> None:
    pool, name = _pool(DockerConfig(image_aliases={"task-image:1": BASE_IMAGE}))
    async with pool:
        for image in (SlotImage(name=BASE_IMAGE), SlotImage(name="task-image:1")):
            slot = await pool.acquire_image("t", image)
            assert slot.workspace.startswith("/workspace/")  # no workdir: the backend's own
            release = await slot.exec("cat /etc/debian_version", timeout=30)
            assert release.stdout.startswith("12.")
            await pool.release(slot)
        assert _docker("ps", "-aq", "--filter", f"label={POOL_LABEL}={name}") == []


@pytest.mark.slow
@docker
async def test_an_image_that_cannot_be_had_is_one_line_naming_it() -> None:
    missing = f"hermes-no-such-image:{uuid.uuid4().hex[:8]}"
    config = DockerConfig(alias_option="--sandbox-image-alias NAME=IMAGE")
    pool, name = _pool(config)
    async with pool:
        with pytest.raises(ImageUnavailable) as info:
            await pool.acquire_image("t", SlotImage(name=missing))
        message = str(info.value)
        assert "\n" not in message
        assert f"image {missing!r} is not on this Docker host" in message
        assert "--sandbox-image-alias NAME=IMAGE" in message
        broken = {"Dockerfile": f"FROM {missing}\n".encode()}
        built = rf"building image hermes-image:\w+ \(FROM {missing}\) failed"
        with pytest.raises(ImageUnavailable, match=built):
            await pool.acquire_image("t", SlotImage(build_context=broken))
        assert pool.stats().hosts == 0
    assert _docker("ps", "-aq", "--filter", f"label={POOL_LABEL}={name}") == []
