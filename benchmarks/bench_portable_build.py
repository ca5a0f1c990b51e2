"""Portable llama.cpp build vs a native one: decode tokens/s of the same GGUF, same run.

The workspace builds llama-cpp-python with ``GGML_NATIVE=OFF`` + AVX2/FMA/F16C so it runs on
every x86-64 CPU we meet (a native build dies with SIGSEGV on CPUs that advertise unusable
AMX). This measures what that costs: llama-cpp-python's raw generation loop, once on the
installed (portable) libraries and once on a native build of the same vendored llama.cpp
(``LLAMA_CPP_LIB_PATH``), in interleaved rounds in separate processes.

The native libraries are not built here (minutes of compiling, and they crash on AMX CPUs):
build them into ``NATIVE_DIR`` first (see docs/benchmarks.md); without them the benchmark says
so and writes nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.report import write_section

ROUNDS = 5
TOKENS = 128
NATIVE_DIR = Path.home() / ".cache" / "hermes-rl" / "llama-native-0.3.36" / "lib"

_DECODE = r"""
import json, sys, time
import llama_cpp
from hermes_loop.embedded import default_model_path, default_threads
llama = llama_cpp.Llama(str(default_model_path()), n_ctx=1024, n_threads=default_threads(),
                        verbose=False, seed=1)
prompt = llama.tokenize(b"<|im_start|>user\nWrite a long story about a dragon.<|im_end|>\n"
                        b"<|im_start|>assistant\n", special=True)
def run():
    started, count = time.perf_counter(), 0
    for _ in llama.generate(prompt, top_k=0, top_p=1.0, min_p=0.0, temp=1.0,
                            repeat_penalty=1.0, reset=True):
        count += 1
        if count == int(sys.argv[1]):
            break
    return count / (time.perf_counter() - started)
run()  # warm-up
print(json.dumps(run()))
"""


def _amx_advertised() -> bool:
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _decode(native: bool) -> float:
    env = dict(os.environ)
    if native:
        env["LLAMA_CPP_LIB_PATH"] = str(NATIVE_DIR)
    done = subprocess.run(
        [sys.executable, "-c", _DECODE, str(TOKENS)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    if _amx_advertised():
        print("skipped: this CPU advertises AMX; a native build may crash here", flush=True)
        return
    if not (NATIVE_DIR / "libllama.so").is_file():
        print(f"skipped: no native build in {NATIVE_DIR} (see docs/benchmarks.md)", flush=True)
        return
    portable: list[float] = []
    native: list[float] = []
    for _ in range(ROUNDS):
        portable.append(_decode(native=False))
        native.append(_decode(native=True))
    ratios = [p / n for p, n in zip(portable, native, strict=True)]
    lines = [
        f"SmolLM2-135M Q8_0 (the default), llama-cpp-python's raw `generate` loop, {TOKENS} "
        "tokens, "
        f"{ROUNDS} interleaved rounds (separate processes).",
        "",
        "| build | median tokens/s | min | max |",
        "|---|---|---|---|",
        f"| portable (installed: GGML_NATIVE=OFF, AVX2) | {statistics.median(portable):.1f} "
        f"| {min(portable):.1f} | {max(portable):.1f} |",
        f"| native (GGML_NATIVE=ON, this CPU) | {statistics.median(native):.1f} "
        f"| {min(native):.1f} | {max(native):.1f} |",
        "",
        f"Portable / native, paired by round: median **{statistics.median(ratios):.2f}x** "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}).",
    ]
    write_section(
        "portable_build",
        "Portable llama.cpp build vs native",
        "uv run nox -s bench -- portable_build",
        "\n".join(lines),
    )
    print("\n".join(lines), flush=True)
