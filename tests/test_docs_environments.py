"""docs/environments.md's "Write, check, run your environment", executed as a newcomer follows
it: the page's environment saved as ``~/my_env.py`` in a home directory outside the
repository, then every command of the section's ``bash`` blocks exactly as written (from the
repository, ``~`` being that home), and its library snippet. Each command must exit 0 and
leave what the page says it leaves.

These runs are also the issue's end-to-end tests: a file outside the repository through the
check, the batch runner and ``atropos_env process``; the example plugin package
(``examples/sales_report``, by its entry point) through the check, the batch runner,
``atropos_env process`` and the trainer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "environments.md"
TITLE = "## Write, check, run your environment"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(TITLE)
    return text[start : text.index("\n## ", start + len(TITLE))]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.DOTALL)


COMMANDS = [line for block in _blocks("bash") for line in block.splitlines() if line.strip()]


def _uv_cache_dir() -> str:
    done = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home directory outside the repository holding the page's ``my_env.py``."""
    home = tmp_path_factory.mktemp("newcomer")
    (home / "my_env.py").write_text(_blocks("python")[0], encoding="utf-8")
    return home


def _run(command: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "MODAL_"))}
    env.update(HOME=str(home), UV_CACHE_DIR=_uv_cache_dir())
    return subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _listed(done: subprocess.CompletedProcess[str], home: Path) -> None:
    for name in ("endless_terminals", "swe_smith_oracle", "terminal_bench"):
        assert f"{name} " in done.stdout
    assert "sales_report " in done.stdout
    assert "[entry point hermes_sales_report:SalesReportEnv]" in done.stdout


def _checked(done: subprocess.CompletedProcess[str], home: Path) -> None:
    assert done.stdout.splitlines()[-1].startswith("PASSED: 14 passed, 0 failed"), done.stdout


def _batch(run: str, env: str) -> Callable[[subprocess.CompletedProcess[str], Path], None]:
    def check(done: subprocess.CompletedProcess[str], home: Path) -> None:
        [record] = _records(home / "runs" / run / "trajectories.jsonl")
        assert record["env"] == env
        assert record["reward"] in (0.0, 1.0)
        summary = json.loads((home / "runs" / run / "summary.json").read_text())
        assert summary["counts"]["finished"] == 1
        assert (home / "runs" / run / "report.html").is_file()

    return check


def _groups(name: str) -> Callable[[subprocess.CompletedProcess[str], Path], None]:
    def check(done: subprocess.CompletedProcess[str], home: Path) -> None:
        [group] = _records(home / "runs" / name)
        assert len(group["scores"]) == 2  # type: ignore[arg-type]
        assert (home / "runs" / name).with_suffix(".html").is_file()

    return check


def _trained(done: subprocess.CompletedProcess[str], home: Path) -> None:
    run = home / "runs" / "sales_train"
    [step] = _records(run / "metrics.jsonl")
    assert step["step"] == 1
    assert step["rollouts"] == 2
    assert step["trained_groups"] == 1  # SFT on both rollouts: the adapter was updated
    assert (run / "adapter.gguf").is_file()
    assert json.loads((run / "run.json").read_text())["env"] == "sales_report"


#: what each command must leave, by a part of the command only it has
EXPECTED: dict[str, Callable[[subprocess.CompletedProcess[str], Path], None]] = {
    "hermes-envs list": _listed,
    "hermes-envs check ~/my_env.py:ReverseWordsEnv": _checked,
    "hermes-envs check sales_report": _checked,
    "--output ~/runs/reverse ": _batch("reverse", "reverse_words"),
    "~/runs/reverse_groups.jsonl": _groups("reverse_groups.jsonl"),
    "--output ~/runs/sales ": _batch("sales", "sales_report"),
    "~/runs/sales_groups.jsonl": _groups("sales_groups.jsonl"),
    "apps/trainer --env sales_report": _trained,
}


def _key(command: str) -> str:
    """The one key of :data:`EXPECTED` in ``command`` (``""`` when none or several)."""
    keys = [key for key in EXPECTED if key in f"{command} "]
    return keys[0] if len(keys) == 1 else ""


def test_every_command_of_the_section_is_checked() -> None:
    assert all(_key(command) for command in COMMANDS), COMMANDS
    assert sorted(map(_key, COMMANDS)) == sorted(EXPECTED)


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: _key(c).strip(" -~"))
def test_the_command_works_as_documented(command: str, home: Path) -> None:
    done = _run(command, home)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    EXPECTED[_key(command)](done, home)


def test_the_example_readme_shows_the_commands_run_here() -> None:
    readme = (ROOT / "examples" / "sales_report" / "README.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```bash\n(.*?)```", readme, flags=re.DOTALL)
    shown = [line for line in block.splitlines() if line.strip()]
    assert shown
    assert set(shown) <= set(COMMANDS)


def test_the_library_snippet_runs(home: Path) -> None:
    """The page's ``check_environment`` snippet, in a test as the page suggests."""
    snippet = _blocks("python")[1].replace("/path/to/my_env.py", str(home / "my_env.py"))
    body = "".join(f"    {line}\n" for line in snippet.splitlines())
    namespace: dict[str, object] = {}
    exec(compile(f"async def snippet():\n{body}", str(DOC), "exec"), namespace)
    anyio.run(namespace["snippet"])  # type: ignore[arg-type]
