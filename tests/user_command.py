"""A command started as a user starts it (``uv run --frozen --no-sync apps/...``) in its own
process group, with its sandboxes under a private ``TMPDIR``: signal the group, read its output
as it comes, find what it left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from hermes_sandbox.backends.cgroups import host_cgroups, remove_host_cgroups, subtree_for

ROOT = Path(__file__).resolve().parent.parent
NUL = b"\0"


def traversable_tmp() -> Iterator[Path]:
    """A fresh ``TMPDIR`` for one command, removed afterwards. Under the system's temporary
    directory, not pytest's: as root, bwrap slots run as other users and must traverse it."""
    path = Path(tempfile.mkdtemp(prefix="hermes-user-command-"))
    path.chmod(0o755)
    try:
        yield path
    finally:  # a failed run may have left hosts running, mounted, with cgroups: those go first
        for pid in _processes_naming(path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        for point in sorted((m.split()[4] for m in mounts), reverse=True):
            if point.startswith(f"{path}/"):
                subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        subtrees = {subtree_for(str(root)) for root in path.glob("hermes-sandbox-*/bwrap")}
        for subtree, host in host_cgroups():
            if subtree in subtrees:
                with contextlib.suppress(OSError):
                    remove_host_cgroups(subtree, host)
        shutil.rmtree(path, ignore_errors=True)


def _processes_naming(path: Path) -> dict[int, str]:
    """``{pid: command line}`` of the processes whose command line names ``path``."""
    needle = str(path).encode()
    found: dict[int, str] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            found[int(pid)] = repr(cmdline.replace(NUL, b" ")[:200])
    return found


class UserCommand:
    """``uv run`` of an app in a new session; stdout and stderr go to files."""

    def __init__(
        self,
        app: str,
        args: Sequence[str],
        *,
        cwd: Path,
        tmp: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: variables to add to the test's environment."""
        uv = shutil.which("uv")
        if uv is None:
            pytest.skip("uv is not on PATH: these tests start the apps as a user does")
        self.tmp = tmp  # every bwrap host of the run lives beneath it
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("MODAL_", "WANDB_"))}
        environ |= {**(env or {}), "TMPDIR": str(self.tmp)}
        self.out_path, self.err_path = cwd / "stdout.log", cwd / "stderr.log"
        cmd = [uv, "run", "--frozen", "--no-sync", "--project", str(ROOT), str(ROOT / app)]
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [*cmd, *args], cwd=cwd, env=environ, stdout=out, stderr=err, start_new_session=True
            )

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    @property
    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.stderr

    def wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``ready`` until it holds; fail (and kill the group) if the command ends or
        ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"never {what}; output:\n{self.output[-4000:]}")
            time.sleep(0.2)

    def signal_group(self, signum: int) -> None:
        """What ``kill -SIG -- -PGID`` does: ``uv`` and the app both get it."""
        os.killpg(self.process.pid, signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running after {timeout}s; output:\n{self.output[-4000:]}")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def leftovers(self, settle_s: float = 2.0) -> list[str]:
        """Processes (bwrap hosts and their children), mounts, host directories and host
        cgroups of this run still present, after up to ``settle_s`` for exits to be reaped."""
        deadline = time.monotonic() + settle_s
        while True:
            found = self._leftovers()
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def _leftovers(self) -> list[str]:
        found = [f"process {pid}: {line}" for pid, line in _processes_naming(self.tmp).items()]
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        found += [f"mount {line}" for line in mounts if str(self.tmp) in line]
        for hosts in self.tmp.glob("hermes-sandbox-*/bwrap"):
            found += [f"host dir {h}" for h in hosts.iterdir() if not h.name.startswith(".")]
            subtree = subtree_for(str(hosts))
            found += [f"cgroup {s}/{h}" for s, h in host_cgroups() if s == subtree]
        return found
