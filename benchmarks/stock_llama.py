"""Stock llama-cpp-python (PyPI's sdist, without hermes-rl's patches), as a benchmark baseline.

The workspace runs the patched build (third_party/llama-cpp-python). A benchmark that measures
what the patches buy runs its baseline in a child process whose ``PYTHONPATH`` puts this stock
build first: the same sdist and portable flags, built once into
``~/.cache/hermes-rl/llama-cpp-python-<version>-stock`` (4-8 minutes on 2 cores). The child
prints its result with :func:`print_answer`; :func:`run_child` checks which build it loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "third_party" / "llama-cpp-python"


def _pinned() -> tuple[str, dict[str, str]]:
    """The upstream version the wrapper builds, and the workspace's flags for it."""
    version = tomllib.loads((WRAPPER / "pyproject.toml").read_text())["project"]["version"]
    workspace = tomllib.loads((ROOT / "pyproject.toml").read_text())
    flags = workspace["tool"]["uv"]["config-settings-package"]["llama-cpp-python"]
    return version.split("+", 1)[0], flags


def stock_site() -> Path:
    """The directory holding the stock ``llama_cpp`` package, built first if absent."""
    version, flags = _pinned()
    site = Path.home() / ".cache" / "hermes-rl" / f"llama-cpp-python-{version}-stock"
    if (site / "llama_cpp" / "__init__.py").is_file():
        return site
    print(f"building stock llama-cpp-python {version} into {site} (4-8 minutes once)", flush=True)
    settings = [arg for key, value in flags.items() for arg in ("-C", f"{key}={value}")]
    partial = site.with_name(f"{site.name}.part")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(
        [
            *("uv", "pip", "install", "--no-config", "--no-deps", "--quiet"),
            *("--python", sys.executable, "--target", str(partial)),
            *settings,
            f"llama-cpp-python=={version}",
        ],
        check=True,
        timeout=3600,
    )
    partial.replace(site)
    return site


def stock_env() -> dict[str, str]:
    """This process's environment with the stock build ahead of the workspace's."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(stock_site()), str(ROOT)])}


def run_child(module: str, args: Sequence[str], *, stock: bool, timeout_s: float) -> Any:
    """``python -m module args`` in a fresh process on the stock build (``stock``) or the
    workspace's; the result it printed with :func:`print_answer`. Raises if the child loaded
    the other build."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=stock_env() if stock else None,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if ("+hermes." in answer["llama_cpp"]) == stock:
        raise RuntimeError(f"{module} ran llama-cpp-python {answer['llama_cpp']}")
    return answer["result"]


def print_answer(result: Any) -> None:
    """A child's result for :func:`run_child`, with the llama-cpp-python build it loaded."""
    import llama_cpp

    print(json.dumps({"llama_cpp": llama_cpp.__version__, "result": result}))
