"""The README's main command, run the way a newcomer runs it: a clean clone of this commit under
a directory nobody else may enter (as root: /root is mode 700), then the command exactly as the
README writes it; and the README's whole set-up (what to install first, uv where PEP 668 refuses
``pip install``) typed by a second, non-root user in a login shell, on a fresh clone in a mode-700
home, with no cache of root's. A crash (e.g. a llama.cpp build that dies on this CPU), a sandbox
that cannot start, or an agent that never acts turns this red.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def readme_main_command() -> str:
    """The first line of the README's first ``bash`` block, without its comment."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None, "README.md has no ```bash block"
    line = block.group(1).splitlines()[0]
    return line.split("#", 1)[0].strip()


def readme_prerequisites() -> str:
    """The README's "before the first line" command for Debian and Ubuntu."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(r"`(apt-get update && apt-get install -y [^`]+)`", text)
    assert found is not None, "README.md names no apt-get line to run before its set-up"
    return found.group(1)


def test_readme_names_the_batch_runner_as_its_main_command() -> None:
    command = readme_main_command()
    assert command.endswith("uv run apps/batch_runner")
    assert "uv sync" in command


def test_the_readme_sync_keeps_the_trainer_packages() -> None:
    """A plain `uv sync` uninstalled the trainer's packages (jax, optax, ...), and a trainer
    running at that moment died; the README's sync, dry-run here, must remove nothing."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the trainer's dependencies are not installed (`nox -s tests` installs them)")
    (sync,) = [part.strip() for part in readme_main_command().split("&&") if "uv sync" in part]
    done = subprocess.run(
        [*sync.split(), "--frozen", "--offline", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "Would make no changes" in said, said


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.timeout(2400)
def test_clean_clone_runs_the_readme_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    clone = home / "hermes-rl"
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)

    done = subprocess.run(
        ["bash", "-c", readme_main_command() + " --no-progress"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    check_default_run(clone, done.stderr)


def check_default_run(clone: Path, stderr: str) -> None:
    """The default run in ``clone`` finished, its agents ran tools in their sandboxes, and the
    summary line, ``summary.json``, the records and the report agree."""
    (run,) = (clone / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True, summary
    counts = summary["counts"]
    assert counts["failed"] == 0, counts
    assert counts["kept"] + counts["filtered"] == counts["expected"] > 0
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == counts["kept"]
    executed = [
        message
        for record in records
        for message in record["messages"][record["metadata"]["workspace"]["prefill_messages"] + 1 :]
        if message["role"] == "tool" and '"exit_code"' in (message["content"] or "")
    ]
    assert executed, "no rollout of the default run executed a tool call in its sandbox"
    assert summary["tool_errors"]["tool_calls"] >= len(executed)
    assert f"tool calls {summary['tool_errors']['tool_calls']}" in stderr
    assert (run / "report.html").is_file()
    assert json.loads((run / "run.json").read_text())["config"]["sandbox"] == "bwrap"


#: the second user; its home (and uv cache) persist across runs like a real user's, never root's
NEWCOMER = "hermes-newcomer"
#: what the README says to type where ``pip install uv`` is refused
PIPX_UV = "pipx install uv"


#: how this machine reaches PyPI (its CA bundle, a proxy): kept in the second user's login shell
NETWORK_ENV = re.compile(r"(SSL_CERT_FILE|SSL_CERT_DIR|(HTTPS?|NO|ALL)_PROXY)", re.IGNORECASE)


def as_newcomer(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``command`` in a fresh login shell of the second user (its own environment and PATH,
    but this machine's network settings, as its administrator would give every user)."""
    keep = [f"--whitelist-environment={name}" for name in os.environ if NETWORK_ENV.fullmatch(name)]
    return subprocess.run(
        ["runuser", "--login", NEWCOMER, *keep, "--command", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or not all(map(shutil.which, ("apt-get", "useradd", "runuser", "git"))),
    reason="a second user and the README's apt-get line need root on Debian or Ubuntu",
)
@pytest.mark.timeout(3000)
def test_a_second_non_root_user_follows_the_readme() -> None:
    assert PIPX_UV in " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    apt = subprocess.run(
        ["bash", "-c", readme_prerequisites()],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    assert apt.returncode == 0, apt.stderr[-2000:]
    if subprocess.run(["id", NEWCOMER], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", NEWCOMER], check=True)
    user = pwd.getpwnam(NEWCOMER)
    home = Path(user.pw_dir)
    home.chmod(0o700)
    clone = home / f"hermes-rl-{os.getpid()}"
    shutil.rmtree(clone, ignore_errors=True)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)
    subprocess.run(["chown", "-R", f"{NEWCOMER}:{user.pw_gid}", str(clone)], check=True)
    try:
        get_uv, rest = readme_main_command().split(" && ", 1)
        pip = as_newcomer(get_uv, timeout=600)
        if pip.returncode != 0:  # PEP 668, as the README says: then pipx, and a new login
            assert "externally-managed-environment" in pip.stdout + pip.stderr, pip.stderr
            pipx = as_newcomer(PIPX_UV, timeout=600)
            assert pipx.returncode == 0, pipx.stderr[-2000:]
        done = as_newcomer(f"cd {clone} && {rest} --no-progress", timeout=2400)
        assert done.returncode == 0, done.stderr[-4000:]
        check_default_run(clone, done.stderr)
        foreign = [p for p in clone.rglob("*") if p.lstat().st_uid != user.pw_uid]
        assert not foreign, f"files of another user in the newcomer's clone: {foreign[:5]}"
    finally:
        shutil.rmtree(clone, ignore_errors=True)
