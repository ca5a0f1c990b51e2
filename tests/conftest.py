"""Shared integration fixtures: a real ``llama-server`` with SmolLM2 on loopback.

The binary is the one ``.ci/llama-server.sh`` builds (``nox -s llama_server`` runs the script
and these tests) into ``~/.cache/hermes-rl/llama-server-<llama-cpp-python version>/bin``;
tests that need it skip with a reason when it is absent.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import attrs
import httpx
import pytest
from hermes_loop.engine import EXACT_LLAMA_SERVER_FLAGS

#: the flags of the issue's measurements: Jinja templates, four parallel slots
DEFAULT_FLAGS = ("--jinja", "-np", "4", "-c", "8192")
#: one slot, 32-token micro-batches, flash attention and the embedded sampler's q8_0 K/V cache:
#: a recompute reproduces the generation (and the embedded sampler) at agent prompt lengths
EXACT_FLAGS = ("--jinja", *EXACT_LLAMA_SERVER_FLAGS, "-c", "4096")
START_TIMEOUT_S = 120.0
#: ChatML with the tools in the Hermes format, as our token mode's fallback renders them
TOOLS_TEMPLATE = (
    Path(__file__).resolve().parent.parent
    / "packages/hermes-rollouts/src/hermes_rollouts/data/chatml-tools.jinja"
)


def llama_server_binary() -> Path:
    """Where ``.ci/llama-server.sh`` puts the binary for the locked llama-cpp-python."""
    cache = Path.home() / ".cache" / "hermes-rl"
    return cache / f"llama-server-{version('llama-cpp-python')}" / "bin" / "llama-server"


@attrs.frozen
class LlamaServer:
    """A running server: its base URL, the GGUF it serves and that GGUF's HF tokenizer."""

    url: str
    gguf: Path
    tokenizer_dir: Path
    flags: tuple[str, ...]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(flags: tuple[str, ...], tmp: Path) -> Iterator[LlamaServer]:
    binary = llama_server_binary()
    if not binary.is_file():
        pytest.skip(
            f"llama-server is not built at {binary}: run .ci/llama-server.sh (or nox -s "
            "llama_server) to build it"
        )
    from hermes_loop.embedded.hf_export import export_hf_tokenizer
    from hermes_loop.embedded.model_file import resolve_model_path

    gguf = resolve_model_path(None)
    tokenizer_dir = export_hf_tokenizer(gguf, tmp / "hf")
    port = _free_port()
    log = (tmp / f"llama-server-{port}.log").open("wb")
    command = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    # one thread: beside the other xdist worker two spin against it (a 1,560-token prefill:
    # 23 s steady at -t 1, 14-48 s at -t 2, medians 23.4 vs 29.4 s; docs/testing.md)
    process = subprocess.Popen(
        [*command, "-t", "1", "--no-webui", *flags], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {process.returncode}; see {log.name}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server not healthy in {START_TIMEOUT_S} s; {log.name}")
            time.sleep(0.2)
        yield LlamaServer(url, gguf, tokenizer_dir, flags)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server with SmolLM2-135M-Instruct, ``--jinja -np 4`` (the default flags)."""
    yield from _start(DEFAULT_FLAGS, tmp_path_factory.mktemp("llama-server"))


@pytest.fixture(scope="session")
def tools_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server with the default flags and a chat template that renders tools
    (hermes_rollouts' chatml-tools.jinja: SmolLM2's own drops them), for a client that sends
    OpenAI chat with ``tools`` (the verifiers adapter)."""
    flags = (*DEFAULT_FLAGS, "--chat-template-file", str(TOOLS_TEMPLATE))
    yield from _start(flags, tmp_path_factory.mktemp("llama-server-tools"))


@pytest.fixture(scope="session")
def exact_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server with the flags that make a recompute bitwise equal (docs/loop.md)."""
    yield from _start(EXACT_FLAGS, tmp_path_factory.mktemp("llama-server-exact"))
