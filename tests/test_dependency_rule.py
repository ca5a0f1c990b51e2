"""The dependency rule: packages meet only through hermes_protocols, and none of them imports
the assembly layer hermes_rollouts (import-linter contracts).

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
    for name in PACKAGES:
        shutil.copytree(
            ROOT / f"packages/hermes-{name}/src/hermes_{name}", src_root / f"hermes_{name}"
        )
    return src_root


def test_real_tree_keeps_the_rule(tmp_path: Path) -> None:
    result = _lint_imports(_copy_sources(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("importer", "imported"),
    [("loop", "parsers"), ("protocols", "envs"), ("report", "loop"), ("envs", "rollouts")],
)
def test_a_sibling_import_breaks_the_check(tmp_path: Path, importer: str, imported: str) -> None:
    src_root = _copy_sources(tmp_path)
    (src_root / f"hermes_{importer}" / "_violation.py").write_text(f"import hermes_{imported}\n")
    result = _lint_imports(src_root)
    assert result.returncode != 0
    assert f"hermes_{importer}._violation -> hermes_{imported}" in result.stdout


def test_the_example_plugin_is_imported_by_nothing_in_the_workspace() -> None:
    """examples/ are packages a user copies: the workspace only reaches them through the
    resolver (a file path or an installed entry point), never by import."""
    sources = [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("apps/*/src/**/*.py")]
    pattern = re.compile(r"^\s*(from|import)\s+hermes_sales_report\b", re.MULTILINE)
    importers = [str(p) for p in sources if pattern.search(p.read_text(encoding="utf-8"))]
    assert importers == []
    members = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'members = ["packages/*", "apps/*"]' in members
