"""The docker/gVisor example of docs/sandbox.md runs as written (both backends, real)."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "sandbox.md"


def _cases() -> ModuleType:
    path = Path(__file__).with_name("test_server_cluster_cases.py")
    spec = importlib.util.spec_from_file_location("hermes_container_docs_cases", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CASES = _cases()
MISSING = _CASES._docker_skip() or _CASES._gvisor_skip()


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: containers -->\n```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, "docs/sandbox.md lost its containers example"
    return found.group(1)


@pytest.mark.slow
@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_the_documented_container_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _example()], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for kind in ("docker", "gvisor"):
        uid, kernel = ast.literal_eval(printed[kind])  # the example prints a list
        assert uid != "0"
        assert kernel
    assert ast.literal_eval(printed["gvisor"])[1] == "4.4.0"  # gVisor's own kernel, not the host's
