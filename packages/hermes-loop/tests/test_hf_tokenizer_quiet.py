"""Loading a tokenizer directory (``--tokenizer DIR``) prints nothing: transformers' notice
that PyTorch is missing is noise for a tokenizer. A fresh process, since transformers logs it
once, when first imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter importing transformers: ~3.5 s

LOAD = """
import sys
from hermes_loop.hf_tokenizer import HFTokenizer
tokenizer = HFTokenizer.from_directory(sys.argv[1])
print(tokenizer.encode("hello"))
"""


def test_loading_a_tokenizer_directory_prints_no_torch_notice(tokenizer_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(tokenizer_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("[")
    assert "PyTorch was not found" not in done.stderr + done.stdout, done.stderr
    assert done.stderr == ""
