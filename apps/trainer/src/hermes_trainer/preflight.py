"""The checks of a run's paths and sources, in seconds, before anything loads (the weights, the
model, a sandbox): each failure one :class:`ConfigError` naming the option to change."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
from hermes_protocols import ConfigError

from hermes_trainer.config import TrainConfig, resume_differences
from hermes_trainer.live import live_environment
from hermes_trainer.lora import read_gguf_adapter
from hermes_trainer.trajectories import check_readable

#: seconds to wait for a source's server to listen and to answer
CONNECT_TIMEOUT_S = 10.0


def check_run(config: TrainConfig) -> None:
    """Check the live source's rollouts (environment, sandbox backend), the other sources
    (trajectory files readable, servers reachable) and ``--adapter``'s directory, then create
    ``--output`` and prove it writable (nothing is created when an earlier check fails)."""
    if config.live:
        live_environment(config)
    check_readable(config.trajectories)
    if config.atropos_url:
        _reachable(config.atropos_url, "--atropos-url")
    if config.tinker is not None and config.tinker.url:
        _reachable(config.tinker.url, "--tinker-url")
    if config.adapter is not None:
        _adapter(config.adapter)
    if config.init_adapter is not None:
        _init_adapter(config)
    if config.resume:
        _resumable(config)
    elif (config.output / "metrics.jsonl").exists():
        raise ConfigError(
            f"--output {config.output} holds a run: --resume continues it; choose another "
            "--output for a new one"
        )
    _output(config.output)


def _resumable(config: TrainConfig) -> None:
    """``--output`` holds a run (``run.json``) with the same options."""
    record = config.output / "run.json"
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"--resume: {record} does not exist: no run to continue") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--resume: cannot read {record}: {exc}") from exc
    differences = resume_differences(recorded, config)
    if differences:
        raise ConfigError(
            "--resume continues a run with its own options; pass them as recorded in "
            f"{record} ({'; '.join(differences)})"
        )


def _reachable(url: str, option: str) -> None:
    """Any HTTP answer will do: the server's own errors come with its first request. A server
    started just before the trainer (``run-api &``) gets ``CONNECT_TIMEOUT_S`` to listen."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            httpx.get(url, timeout=CONNECT_TIMEOUT_S)
            return
        except httpx.ConnectError as exc:
            if time.monotonic() < deadline:
                time.sleep(0.25)
                continue
            error: httpx.HTTPError = exc
        except httpx.HTTPError as exc:
            error = exc
        raise ConfigError(
            f"{option} {url}: {type(error).__name__}: {error}; start the server or fix {option}"
        ) from error


def _adapter(adapter: Path) -> None:
    directory = adapter.parent
    if adapter.is_dir():
        raise ConfigError(f"--adapter {adapter} is a directory; name the adapter file in it")
    if not directory.is_dir():
        raise ConfigError(f"--adapter {adapter}: directory {directory} does not exist")
    _writable(directory, "--adapter")


def _init_adapter(config: TrainConfig) -> None:
    """``--init-adapter`` is a LoRA adapter of ``--lora-rank`` and ``--lora-alpha`` (its
    shapes are checked against the model's when the weights load)."""
    path = config.init_adapter
    if path is None or not path.is_file():
        raise ConfigError(f"--init-adapter {path}: no such file")
    adapter = read_gguf_adapter(path)
    if (adapter.rank, adapter.alpha) != (config.lora.rank, config.lora.alpha):
        raise ConfigError(
            f"--init-adapter {path} has rank {adapter.rank} and alpha {adapter.alpha:g}: pass "
            f"--lora-rank {adapter.rank} --lora-alpha {adapter.alpha:g}"
        )


def _output(output: Path) -> None:
    try:
        output.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ConfigError(f"--output {output} is a file; choose a directory") from exc
    except OSError as exc:
        raise ConfigError(f"cannot create --output {output}: {exc.strerror}") from exc
    _writable(output, "--output")


def _writable(directory: Path, option: str) -> None:
    probe = directory / f".write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"{option}: cannot write in {directory}: {exc.strerror}; choose another {option}"
        ) from exc
