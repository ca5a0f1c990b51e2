"""The dependency rule: packages meet only through hermes_protocols, and none of them imports
the assembly layer hermes_rollouts; apps reach the packages only through hermes_rollouts
(plus hermes_protocols and hermes_report), and no app imports another (import-linter
contracts).

The contracts live in the root pyproject.toml; this test runs them on the real tree and on a
copy with one violating module, to show the check can fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["protocols", "parsers", "loop", "sandbox", "envs", "report", "rollouts"]
#: source directory of each module import-linter checks
SOURCES = {
    **{f"hermes_{name}": f"packages/hermes-{name}/src/hermes_{name}" for name in PACKAGES},
    "hermes_atropos_env": "apps/atropos_env/src/hermes_atropos_env",
    "hermes_batch_runner": "apps/batch_runner/src/hermes_batch_runner",
    "hermes_trainer": "apps/trainer/src/hermes_trainer",
    "hermes_verifiers_env": "apps/verifiers_env/src/hermes_verifiers_env",
    "hermes_tinker_cookbook_env": "apps/tinker_cookbook_env/src/hermes_tinker_cookbook_env",
    "hermes_trl_env": "apps/trl_env/src/hermes_trl_env",
}


def _lint_imports(src_root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src_root)}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "lint-imports"),
            "--config",
            str(ROOT / "pyproject.toml"),
            "--no-cache",
        ],
        cwd=src_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_sources(tmp_path: Path) -> Path:
    src_root = tmp_path / "src"
    for module, source in SOURCES.items():
        shutil.copytree(ROOT / source, src_root / module)
    return src_root


def test_real_tree_keeps_the_rule(tmp_path: Path) -> None:
    result = _lint_imports(_copy_sources(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 6 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("hermes_loop", "hermes_parsers"),
        ("hermes_protocols", "hermes_envs"),
        ("hermes_report", "hermes_loop"),
        ("hermes_envs", "hermes_rollouts"),
        ("hermes_batch_runner", "hermes_loop"),
        ("hermes_atropos_env", "hermes_sandbox"),
        ("hermes_trainer", "hermes_envs"),
        ("hermes_trainer", "hermes_atropos_env"),
        ("hermes_verifiers_env", "hermes_sandbox"),
        ("hermes_verifiers_env", "hermes_trainer"),
        ("hermes_tinker_cookbook_env", "hermes_loop"),
        ("hermes_tinker_cookbook_env", "hermes_verifiers_env"),
        ("hermes_trl_env", "hermes_envs"),
        ("hermes_trl_env", "hermes_tinker_cookbook_env"),
        ("hermes_rollouts", "hermes_batch_runner"),
    ],
)
def test_a_forbidden_import_breaks_the_check(tmp_path: Path, importer: str, imported: str) -> None:
    src_root = _copy_sources(tmp_path)
    (src_root / importer / "_violation.py").write_text(f"import {imported}\n")
    result = _lint_imports(src_root)
    assert result.returncode != 0
    assert f"{importer}._violation -> {imported}" in result.stdout


def test_the_example_plugin_is_imported_by_nothing_in_the_workspace() -> None:
    """examples/ are packages a user copies: the workspace only reaches them through the
    resolver (a file path or an installed entry point), never by import."""
    sources = [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("apps/*/src/**/*.py")]
    pattern = re.compile(r"^\s*(from|import)\s+hermes_sales_report\b", re.MULTILINE)
    importers = [str(p) for p in sources if pattern.search(p.read_text(encoding="utf-8"))]
    assert importers == []
    members = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'members = ["packages/*", "apps/*"]' in members
