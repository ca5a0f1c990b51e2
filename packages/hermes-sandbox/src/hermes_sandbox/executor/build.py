"""Build ``hermes-exec`` (``agent.c``) once with the machine's C compiler, cached by content.

The agent is a static binary, so it runs in any root filesystem or container (no libc or
Python needed inside). The build takes about a second and is keyed by the source, the compiler
and its flags: ``<directory>/hermes-exec-<digest>``, built under a lock and written atomically
(mode 0755), so concurrent pools wait for one build and a changed source gets a new one. Pools
build into the user's own cache and copy the binary into their root.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources

from hermes_protocols import IsolationUnavailable

from hermes_sandbox.backends._root_dir import reachable_copy, user_bin_dir

COMPILERS = ("cc", "gcc", "clang")
FLAGS = ("-O2", "-static", "-s", "-std=gnu11", "-Wall")
BUILD_TIMEOUT_S = 120.0


def agent_source() -> bytes:
    """The C source of the agent, as shipped in this package."""
    return resources.files("hermes_sandbox.executor").joinpath("agent.c").read_bytes()


def find_compiler() -> str:
    """The first C compiler on ``PATH``; ``IsolationUnavailable`` saying how to get one."""
    for name in COMPILERS:
        path = shutil.which(name)
        if path is not None:
            return path
    raise IsolationUnavailable(
        "building the sandbox's command executor (hermes-exec, a small static C program, once) "
        "needs a C compiler and static libc: install them (Debian/Ubuntu: apt install gcc "
        "libc6-dev), or build it elsewhere with `hermes-sandbox build-executor OUT` and pass "
        "executor_binary=OUT in the backend's config"
    )


def _compiler_id(compiler: str) -> bytes:
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise IsolationUnavailable(f"the C compiler {compiler} does not run: {exc}") from exc
    return done.stdout


def build_agent(directory: str) -> str:
    """The path of the agent binary under ``directory``, compiling it first when missing.

    Blocking (run it in a worker thread). Raises ``IsolationUnavailable`` with the compiler's
    message when the build fails.
    """
    compiler = find_compiler()
    source = agent_source()
    digest = hashlib.sha256(
        source + b"\0" + _compiler_id(compiler) + b"\0" + " ".join(FLAGS).encode()
    ).hexdigest()[:16]
    target = os.path.join(directory, f"hermes-exec-{digest}")
    if os.path.isfile(target):
        return target
    os.makedirs(directory, mode=0o755, exist_ok=True)
    with open(os.path.join(directory, ".build.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent pools wait for one build
        if not os.path.isfile(target):
            _compile(compiler, source, target)
    return target


def _compile(compiler: str, source: bytes, target: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hermes-exec-build-") as scratch:
        src = os.path.join(scratch, "agent.c")
        with open(src, "wb") as f:
            f.write(source)
        out = os.path.join(scratch, "hermes-exec")
        try:
            subprocess.run(
                [compiler, *FLAGS, "-o", out, src],
                capture_output=True,
                timeout=BUILD_TIMEOUT_S,
                check=True,
            )
        except subprocess.CalledProcessError as exc:
            lines = exc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise IsolationUnavailable(
                f"compiling the command executor with {compiler} failed "
                f"({lines[-1] if lines else f'exit {exc.returncode}'}); a static build needs "
                "static libc (Debian/Ubuntu: apt install libc6-dev)"
            ) from exc
        except (OSError, subprocess.SubprocessError) as exc:
            raise IsolationUnavailable(f"compiling the command executor failed: {exc}") from exc
        partial = f"{target}.{os.getpid()}.partial"
        shutil.copyfile(out, partial)
    os.chmod(partial, 0o755)
    os.replace(partial, target)


def agent_binary(directory: str, given: str | None) -> str:
    """The agent to run: a world-readable copy under ``directory`` of ``given`` (a prebuilt
    one), or of the one built once per user (in :func:`user_bin_dir`, so pools in new roots
    copy it instead of compiling it again). Blocking."""
    if given is None:
        built = build_agent(user_bin_dir())
        if os.path.realpath(directory) == os.path.realpath(os.path.dirname(built)):
            return built
        given = built
    return reachable_copy(given, directory)
