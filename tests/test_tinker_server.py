"""The SkyRL Tinker API server (tests/tinker_server.py) starts, its engine loads SmolLM2, it
answers, and it goes away with its engine when the context exits."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.tinker_server import live_processes, tinker_model_dir, tinker_server

pytestmark = pytest.mark.slow


def _engines(tmp_path: Path) -> list[int]:
    return [
        pid
        for pid, _, cmdline in live_processes()
        if "-m tx.tinker.engine" in cmdline and str(tmp_path) in cmdline
    ]


def test_tinker_server_starts_answers_and_stops(tmp_path: Path) -> None:
    with tinker_server(tmp_path) as url:
        assert httpx.get(f"{url}/api/v1/healthz", timeout=10).json()["status"] == "ok"
        capabilities = httpx.get(f"{url}/api/v1/get_server_capabilities", timeout=10).json()
        models = [m["model_name"] for m in capabilities["supported_models"]]
        assert models == [str(tinker_model_dir())]
        engines = _engines(tmp_path)
        assert engines, "the API server's engine process is not running"
    assert not _engines(tmp_path), "the engine outlived the context"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v1/healthz", timeout=5)
