"""Build backend: llama-cpp-python's pinned PyPI sdist with the llama.cpp patches in patches/.

It downloads the sdist named in pyproject.toml (checked against its sha256), applies every
``patches/*.patch`` to its vendored llama.cpp with ``patch -p1``, stamps the local version, and
hands the tree to scikit-build-core. Wheels are cached in
``~/.cache/hermes-rl/llama-cpp-python-<version>/wheels/<key>/``, keyed by the sdist, the version,
the patches and the build's config settings (bump the version's ``+hermes.N`` when this file
changes what it builds): uv rebuilds a local directory in every fresh clone, and a cached wheel
turns that 4-8 minute compile into a copy.

``python hermes_llama_build.py prepare DIR`` prints the path of a patched source tree made under
DIR (``.ci/llama-server.sh`` builds llama-server from it); ``... patch-id`` and ``... version``
print the key of the patch set and the package version.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYPROJECT = tomllib.loads((HERE / "pyproject.toml").read_text())
VERSION: str = PYPROJECT["project"]["version"]
UPSTREAM_VERSION = VERSION.split("+", 1)[0]
SDIST_URL: str = PYPROJECT["tool"]["hermes-llama-build"]["sdist-url"]
SDIST_SHA256: str = PYPROJECT["tool"]["hermes-llama-build"]["sdist-sha256"]
PATCHES = sorted((HERE / "patches").glob("*.patch"))
CACHE = Path.home() / ".cache" / "hermes-rl" / f"llama-cpp-python-{UPSTREAM_VERSION}"
DOWNLOAD_TIMEOUT_S = 300


class BuildError(Exception):
    """The patched source could not be prepared (download, checksum, patch)."""


def _say(message: str) -> None:
    print(f"hermes_llama_build: {message}", file=sys.stderr, flush=True)


def patch_id() -> str:
    """The key of the patch set: every patch's name and bytes."""
    digest = hashlib.sha256()
    for patch in PATCHES:
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes())
    return digest.hexdigest()[:16]


def _wheel_key(config_settings: dict[str, Any] | None) -> str:
    digest = hashlib.sha256()
    for part in (SDIST_SHA256, VERSION, patch_id(), sys.platform, platform.machine()):
        digest.update(part.encode() + b"\0")
    digest.update(json.dumps(config_settings or {}, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sdist() -> Path:
    """The pinned sdist, downloaded once into the cache and checked against its sha256."""
    target = CACHE / "sdist" / SDIST_URL.rsplit("/", 1)[1]
    if target.is_file() and _sha256(target) == SDIST_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    _say(f"downloading {SDIST_URL}")
    try:
        with (
            urllib.request.urlopen(SDIST_URL, timeout=DOWNLOAD_TIMEOUT_S) as response,
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(response, out, 1 << 20)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise BuildError(f"downloading {SDIST_URL} failed: {error}") from error
    if (got := _sha256(partial)) != SDIST_SHA256:
        partial.unlink()
        raise BuildError(f"{SDIST_URL} has sha256 {got}, expected {SDIST_SHA256}")
    partial.replace(target)
    return target


def prepare(parent: Path) -> Path:
    """Unpack the sdist under ``parent``, apply the patches, stamp the version; return the tree."""
    if shutil.which("patch") is None:
        raise BuildError("`patch` is not installed (Debian: apt-get install patch)")
    with tarfile.open(_sdist()) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(parent, filter="data")
        else:  # Python before 3.11.4 (Debian 12's 3.11.2); the archive's sha256 is checked
            archive.extractall(parent)
    tree = parent / f"llama_cpp_python-{UPSTREAM_VERSION}"
    for patch in PATCHES:
        _say(f"applying {patch.name}")
        run = subprocess.run(
            ["patch", "-p1", "--forward", "--batch", "-i", str(patch)],
            cwd=tree / "vendor" / "llama.cpp",
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise BuildError(f"{patch.name} does not apply: {run.stdout}{run.stderr}".strip())
    init = tree / "llama_cpp" / "__init__.py"
    old = f'__version__ = "{UPSTREAM_VERSION}"'
    text = init.read_text()
    if text.count(old) != 1:
        raise BuildError(f"{init} does not declare {old}")
    init.write_text(text.replace(old, f'__version__ = "{VERSION}"'))
    return tree


def _cached_wheel(key: str) -> Path | None:
    found = sorted((CACHE / "wheels" / key).glob("*.whl"))
    return found[0] if found else None


def _build_into_cache(key: str, config_settings: dict[str, Any] | None) -> Path:
    from scikit_build_core import build as skbuild  # the build environment's, not ours

    with tempfile.TemporaryDirectory(prefix="hermes-llama-build-") as scratch:
        tree = prepare(Path(scratch))
        out = Path(scratch) / "dist"
        out.mkdir()
        here = Path.cwd()
        os.chdir(tree)
        try:
            name = skbuild.build_wheel(str(out), config_settings)
        finally:
            os.chdir(here)
        slot = CACHE / "wheels" / key
        staging = CACHE / "wheels" / f"{key}.{os.getpid()}.part"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        shutil.copy2(out / name, staging / name)
        shutil.rmtree(slot, ignore_errors=True)
        staging.replace(slot)
    _say(f"cached {slot / name}")
    return slot / name


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing when the wheel is cached; otherwise what scikit-build-core needs (cmake, ninja)."""
    if _cached_wheel(_wheel_key(config_settings)) is not None:
        return []
    from scikit_build_core import build as skbuild

    requires: list[str] = skbuild.get_requires_for_build_wheel(config_settings)
    return requires


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 517: the patched wheel, from the cache or built into it first."""
    key = _wheel_key(config_settings)
    wheel = _cached_wheel(key)
    if wheel is None:
        wheel = _build_into_cache(key, config_settings)
    else:
        _say(f"using cached {wheel}")
    shutil.copy2(wheel, Path(wheel_directory) / wheel.name)
    return wheel.name


def main(argv: list[str]) -> int:
    """``prepare DIR``, ``patch-id`` or ``version``, for .ci/llama-server.sh."""
    if argv in (["patch-id"], ["version"]):
        print(patch_id() if argv == ["patch-id"] else VERSION)
        return 0
    if argv[:1] == ["prepare"] and len(argv) == 2:
        try:
            print(prepare(Path(argv[1])))
        except BuildError as error:
            _say(str(error))
            return 1
        return 0
    _say("usage: hermes_llama_build.py prepare DIR | patch-id | version")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
