"""The pytest a SWE-smith slot gets is pytest's own dependency closure on this platform, also
when another package has put its vendored copies on ``sys.path`` (Ray adds its
``thirdparty_files``, whose colorama lists files it does not ship: packing it failed every
SWE-smith test that ran after a Ray test in the same worker)."""

from __future__ import annotations

import io
import tarfile

import pytest
from hermes_envs.swe_smith.verify import _closure, host_package_tar


def test_the_closure_leaves_out_what_pytest_needs_on_other_platforms_only() -> None:
    pytest.importorskip("ray")  # its import puts its vendored colorama on sys.path
    names = {d.metadata["Name"].lower() for d in _closure("pytest")}
    assert {"pytest", "pluggy", "iniconfig", "packaging"} <= names
    assert "colorama" not in names  # pytest requires it on Windows only
    with tarfile.open(fileobj=io.BytesIO(host_package_tar())) as tar:
        assert "pytest/__init__.py" in tar.getnames()
