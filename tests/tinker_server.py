"""A real Tinker API server for tests: SkyRL's ``skyrl-tx`` 0.3.0 on CPU (JAX) serving
SmolLM2-135M-Instruct, from the environment ``.ci/skyrl-tx.sh`` installs under
``~/.cache/hermes-rl/skyrl-tx-0.3.0`` (tests skip with that command when it is absent).

``python -m tx.tinker.api`` answers HTTP itself and starts its engine (the process that loads
the model and runs every request) as ``uv run --extra tinker --extra jax -m tx.tinker.engine``.
Outside a uv project that ``uv run`` runs the engine with the active virtual environment, so the
server gets ``VIRTUAL_ENV`` (the cached venv), ``UV_NO_PROJECT=1`` (never the workspace's
project, whatever the working directory) and ``uv`` on ``PATH``. Ready means the engine has
loaded the model: a LoRA adapter is created and unloaded over plain HTTP (what the tinker SDK's
``create_lora_training_client`` does), after ``GET /api/v1/healthz`` answers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import background_process, clean_env, free_port

SKYRL_TX_VERSION = "0.3.0"
INSTALL_COMMAND = "bash .ci/skyrl-tx.sh"
#: model loading and the engine's first JAX compilation on 2 busy cores
START_TIMEOUT_S = 300.0
#: few adapter slots and a small rank keep the engine's LoRA buffers small (the defaults, 32 x
#: rank 32, got the engine OOM-killed at 23.6 GB); 2-sequence micro batches (gradients
#: accumulated) take the engine's peak RSS for a forward_backward of 8 x 200 tokens (its JIT
#: compilation) from 12.5 GB to 5.5 GB, and it is faster (gradient checkpointing: 12.0 GB alone,
#: 5.4 GB with micro batches but slower)
#: the engine's compilation cache holds 438 MB for the Tinker test; least recently used entries
#: go past this
JAX_CACHE_MAX_BYTES = 2 * 1024**3
BACKEND_CONFIG: dict[str, Any] = {
    "max_lora_adapters": 4,
    "max_lora_rank": 8,
    "train_micro_batch_size": 2,
}


def skyrl_tx_cache() -> Path:
    return Path.home() / ".cache" / "hermes-rl" / f"skyrl-tx-{SKYRL_TX_VERSION}"


def tinker_model_dir() -> Path:
    """The base model the server serves (pass it as ``base_model`` to the tinker SDK)."""
    return skyrl_tx_cache() / "smollm2-135m"


def jax_cache_dir() -> Path:
    """The engine's persistent JAX compilation cache, kept beside the skyrl-tx install and keyed
    by this CPU's feature flags too, as the trainer keys its own (``cpu_key``). JAX keys entries
    by its own version and flags. Measured: the Tinker test took 252 s with an empty cache, 159
    s with a warm one."""
    from hermes_trainer.compile_cache import cpu_key

    return skyrl_tx_cache() / f"jax-cache-{cpu_key()}"


def _server_env(home: Path, venv: Path, uv: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in clean_env(home).items()
        if not k.startswith(("UV_", "VIRTUAL_ENV", "PYTHON", "CONDA_", "JAX_", "XLA_"))
    }
    path = [str(venv / "bin"), str(Path(uv).parent), env.get("PATH", "/usr/bin:/bin")]
    env.update(
        PATH=os.pathsep.join(path),
        VIRTUAL_ENV=str(venv),
        UV_NO_PROJECT="1",
        UV_CACHE_DIR=str(home / ".cache" / "uv"),
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(jax_cache_dir()),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_COMPILATION_CACHE_MAX_SIZE=str(JAX_CACHE_MAX_BYTES),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def live_processes() -> Iterator[tuple[int, int, str]]:
    """(pid, process group, command line) of every process that is not a zombie (Linux)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if state not in ("Z", "X"):
            yield int(entry.name), int(pgrp), cmdline.replace(b"\0", b" ").decode(errors="replace")


def _group_alive(pgid: int) -> list[int]:
    return [pid for pid, pgrp, _ in live_processes() if pgrp == pgid]


def _kill_group(pgid: int, timeout: float = 20.0) -> None:
    """SIGTERM what is left of the group (the engine outlives an API server that crashed),
    SIGKILL what survives ``timeout``, and wait until no member is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            return
        with suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + timeout
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    if alive := _group_alive(pgid):
        raise RuntimeError(f"tinker server processes {alive} survived SIGKILL")


def _log_tail(log: Path, lines: int = 30) -> str:
    text = log.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _diagnosis(proc: Any, pgid: int, log: Path) -> str:
    """What a failed test needs to know about the server: is it (and its engine) still
    running, and what it printed last (an engine killed for memory shows in ``dmesg``)."""
    state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
    members = [cmd for _, pgrp, cmd in live_processes() if pgrp == pgid]
    engine = "running" if any("tx.tinker.engine" in cmd for cmd in members) else "not running"
    return f"tinker server: API {state}, engine {engine}; {log}:\n{_log_tail(log)}"


def _wait_ready(url: str, proc: Any, log: Path, base_model: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout

    def check_alive() -> None:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the tinker server exited with {proc.returncode}; {log}:\n{_log_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"the tinker server was not ready in {timeout} s; {log}")

    with httpx.Client(base_url=url, timeout=10.0) as client:
        while True:
            check_alive()
            try:
                if client.get("/api/v1/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

        def future(response: httpx.Response) -> Any:
            response.raise_for_status()
            request_id = response.json()["request_id"]
            while True:
                check_alive()
                wait = max(1.0, deadline - time.monotonic())
                try:
                    done = client.post(
                        "/api/v1/retrieve_future", json={"request_id": request_id}, timeout=wait
                    )
                except httpx.TimeoutException:
                    continue
                if done.status_code != 408:
                    done.raise_for_status()
                    return done.json()

        session = client.post(
            "/api/v1/create_session", json={"tags": ["readiness"], "sdk_version": "0"}
        )
        session.raise_for_status()
        created = client.post(
            "/api/v1/create_model",
            json={
                "session_id": session.json()["session_id"],
                "base_model": base_model,
                "lora_config": {"rank": 1, "seed": 0},
            },
        )
        future(created)
        future(client.post("/api/v1/unload_model", json={"model_id": created.json()["model_id"]}))


@contextmanager
def tinker_server(tmp_path: Path, *, timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """Start skyrl-tx's Tinker API server on a free loopback port; yields its base URL once
    the engine has loaded the model. The API server and its engine run in their own session
    (log: ``tmp_path / "tinker-server.log"``) and are killed as one process group on exit."""
    cache = skyrl_tx_cache()
    venv = cache / "venv"
    if not (cache / "complete").is_file():
        pytest.skip(
            f"the skyrl-tx Tinker server is not installed in {cache}: run {INSTALL_COMMAND}"
        )
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("skyrl-tx's API server starts its engine with `uv run`: uv is not on PATH")
    root = tmp_path / "tinker-server"
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    model = str(tinker_model_dir())
    cmd = [
        str(venv / "bin" / "python"), "-m", "tx.tinker.api",
        "--base-model", model,
        "--host", "127.0.0.1", "--port", str(port),
        "--database-url", f"sqlite:///{root / 'tinker.db'}",
        "--checkpoints-base", str(root / "checkpoints"),
        "--external-inference-lora-base", str(root / "lora_models"),
        "--backend-config", json.dumps(BACKEND_CONFIG),
    ]  # fmt: skip
    log = tmp_path / "tinker-server.log"
    env = _server_env(home, venv, uv)
    pgid = None
    try:
        with background_process(cmd, cwd=root, env=env, log=log) as proc:
            pgid = proc.pid
            _wait_ready(url, proc, log, model, timeout)
            try:
                yield url
            except Exception as error:
                error.add_note(_diagnosis(proc, pgid, log))
                raise
    finally:
        if pgid is not None:
            _kill_group(pgid)
