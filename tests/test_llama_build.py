"""third_party/llama-cpp-python: the installed llama.cpp is the patched build the lock names, the
patches apply to the pinned sdist, a cached wheel is reused without a compile, and a download
that does not match its sha256 is refused."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

import llama_cpp
import pytest

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "third_party" / "llama-cpp-python"


def load_backend() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hermes_llama_build", WRAPPER / "hermes_llama_build.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_installed_llama_cpp_is_the_locked_patched_build() -> None:
    backend = load_backend()
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (locked,) = [p for p in lock["package"] if p["name"] == "llama-cpp-python"]
    assert locked["source"] == {"directory": "third_party/llama-cpp-python"}
    assert llama_cpp.__version__ == locked["version"] == backend.VERSION
    assert backend.VERSION.startswith(f"{backend.UPSTREAM_VERSION}+hermes.")


@pytest.mark.slow
@pytest.mark.parametrize("extraction_filters", [True, False])
def test_the_patches_apply_to_the_pinned_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extraction_filters: bool
) -> None:
    backend = load_backend()
    if not extraction_filters:  # Python before 3.11.4, e.g. Debian 12's 3.11.2 for a newcomer
        monkeypatch.delattr(backend.tarfile, "data_filter")
    tree = backend.prepare(tmp_path)
    ops = (tree / "vendor/llama.cpp/ggml/src/ggml-cpu/ops.cpp").read_text()
    assert "static void hermes_fa_q8_0_row(" in ops
    assert "hermes_fa_q8_0_row_64(ic_end" in ops  # the hook in the flash-attention chunk
    init = (tree / "llama_cpp/__init__.py").read_text()
    assert f'__version__ = "{backend.VERSION}"' in init


def test_a_cached_wheel_is_copied_without_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = load_backend()
    monkeypatch.setattr(backend, "CACHE", tmp_path / "cache")
    settings = {"cmake.define.GGML_NATIVE": "OFF"}
    key = backend._wheel_key(settings)
    assert key != backend._wheel_key({})  # the flags are part of the key
    slot = tmp_path / "cache" / "wheels" / key
    slot.mkdir(parents=True)
    wheel = slot / f"llama_cpp_python-{backend.VERSION}-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"a wheel built earlier")
    assert backend.get_requires_for_build_wheel(settings) == []
    out = tmp_path / "out"
    out.mkdir()
    assert backend.build_wheel(str(out), settings) == wheel.name
    assert (out / wheel.name).read_bytes() == b"a wheel built earlier"


def test_a_download_with_another_sha256_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = load_backend()
    fake = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    fake.write_bytes(b"not the pinned sdist")
    monkeypatch.setattr(backend, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(backend, "SDIST_URL", fake.as_uri())
    with pytest.raises(backend.BuildError, match="has sha256 "):
        backend._sdist()
    assert not list((tmp_path / "cache" / "sdist").iterdir())  # nothing half-written is kept
    monkeypatch.setattr(backend, "SDIST_SHA256", hashlib.sha256(fake.read_bytes()).hexdigest())
    assert backend._sdist().read_bytes() == fake.read_bytes()
