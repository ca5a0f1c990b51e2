"""The installed llama.cpp CPU library runs on any x86-64 CPU with AVX2.

A build with llama.cpp's default ``GGML_NATIVE=ON`` compiles for the build machine: on a CPU
that advertises AMX where AMX tile state is unusable (seen in VMs), every generation dies with
SIGSEGV in ``ggml_backend_amx_mul_mat``; AVX-512 code dies with SIGILL on CPUs without it. The
workspace pins portable flags (root ``pyproject.toml``, ``[tool.uv.config-settings-package]``),
so the installed library must hold no AMX tile instruction and no 512-bit (``zmm``) register,
whatever CPU built it. A build with runtime CPU dispatch would ship one library per variant;
llama-cpp-python ships one ``libggml-cpu``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("objdump") is None, reason="objdump (binutils) is not installed"
)

AMX = re.compile(r"\b(ldtilecfg|sttilecfg|tileloaddt?1?|tilestored|tilezero|tdp\w+)\b")
ZMM = re.compile(r"%zmm\d+")


def ggml_cpu_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("llama-cpp-python is not installed (the embedded extra)")
    found = sorted(Path(spec.origin).parent.glob("lib/libggml-cpu*.so"))
    assert found, "llama_cpp ships no libggml-cpu*.so: the layout changed, update this test"
    return found


def disassembly(library: Path) -> str:
    return subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_installed_ggml_cpu_has_no_amx_and_no_avx512() -> None:
    for library in ggml_cpu_libraries():
        code = disassembly(library)
        assert "vfmadd" in code, f"{library} has no FMA code: is this the CPU backend?"
        amx = AMX.findall(code)
        zmm = ZMM.findall(code)
        assert not amx, f"{library}: {len(amx)} AMX instructions (a GGML_NATIVE build?)"
        assert not zmm, f"{library}: {len(zmm)} zmm (AVX-512) uses (a GGML_NATIVE build?)"


NATIVE_SAMPLE = """
#include <immintrin.h>
void f(const void *cfg, float *a) {
    _tile_loadconfig(cfg);
    _tile_zero(0);
    __m512 x = _mm512_loadu_ps(a);
    _mm512_storeu_ps(a, _mm512_add_ps(x, x));
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_the_check_finds_amx_and_avx512_code(tmp_path: Path) -> None:
    source = tmp_path / "native.c"
    source.write_text(NATIVE_SAMPLE, encoding="utf-8")
    built = subprocess.run(
        ["gcc", "-O2", "-mamx-tile", "-mavx512f", "-c", str(source), "-o", str(tmp_path / "n.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip(f"this gcc cannot target AMX: {built.stderr.strip()[:200]}")
    code = disassembly(tmp_path / "n.o")
    assert AMX.findall(code) == ["ldtilecfg", "tilezero"]
    assert len(ZMM.findall(code)) >= 3


def test_the_workspace_pins_portable_llama_cpp_flags() -> None:
    import tomllib

    root = Path(__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    settings = config["tool"]["uv"]["config-settings-package"]["llama-cpp-python"]
    assert settings["cmake.define.GGML_NATIVE"] == "OFF"
    assert settings["cmake.define.GGML_AVX2"] == "ON"
    assert all(settings[f"cmake.define.GGML_{f}"] == "OFF" for f in ("AVX512", "AMX_TILE"))
