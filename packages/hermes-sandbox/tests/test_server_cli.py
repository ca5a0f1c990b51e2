"""The real ``hermes-sandbox serve`` CLI as a subprocess on loopback, driven over raw HTTP."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]
import pytest
from hermes_sandbox.server.run import READY_PREFIX

pytestmark = pytest.mark.slow  # a real server process per test

TOKEN = "test-token-0123456789"


def _start(data_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "hermes_sandbox.cli", "serve", "--port", "0"]
    process = subprocess.Popen(
        [*argv, "--data-dir", str(data_dir), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HERMES_SANDBOX_TOKEN": TOKEN},
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # the server prints its URL once the host is up
    if not line.startswith(READY_PREFIX):
        process.kill()
        _, err = process.communicate(timeout=30)
        raise AssertionError(f"server did not start: {line!r} {err}")
    return process, line[len(READY_PREFIX) :].strip()


@pytest.fixture
def server(sandbox_root: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    data_dir = sandbox_root / "server"
    process, url = _start(data_dir, "--slots", "2")
    try:
        yield url, data_dir, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)


def _client(url: str, token: str = TOKEN) -> httpx.Client:
    return httpx.Client(
        base_url=url + "/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def test_health_is_public_everything_else_needs_the_token(server: tuple[str, Path, Any]) -> None:
    url, _, _ = server
    with httpx.Client(base_url=url + "/v1", timeout=30) as anon:
        health = anon.get("/health").json()
        assert health["status"] == "ok"
        assert health["slots"] == 2
        assert anon.get("/artifacts").status_code == 401
        denied = anon.post("/slots/0/exec", json={"command": "true", "timeout": 5})
        assert denied.status_code == 401
        assert denied.json()["error"] == "unauthorized"
    with _client(url, token="wrong-token-xxxxxxxx") as wrong:
        assert (
            wrong.post("/slots/0/exec", json={"command": "true", "timeout": 5}).status_code == 401
        )


def test_exec_batch_files_reset_and_artifacts(server: tuple[str, Path, Any]) -> None:
    url, _, _ = server
    with _client(url) as http:
        out = http.post("/slots/0/exec", json={"command": "echo $0; pwd; exit 4", "timeout": 10})
        assert out.json()["exit_code"] == 4
        assert out.json()["stdout"].endswith("/workspace\n")
        assert http.post("/slots/5/exec", json={"command": "true", "timeout": 5}).status_code == 404
        bad = http.post("/slots/0/exec", json={"command": "true", "timeout": -1})
        assert bad.status_code == 400
        batch = http.post(
            "/exec_batch",
            json={
                "requests": [
                    {"slot": 0, "command": "echo a", "timeout": 10},
                    {"slot": 1, "command": "cat", "timeout": 10, "stdin_b64": "aGk="},
                    {"slot": 9, "command": "true", "timeout": 10},
                ]
            },
        ).json()["results"]
        assert batch[0]["stdout"] == "a\n"
        assert batch[1]["stdout"] == "hi"
        assert batch[2]["error"] == "no_such_slot"
        blob = os.urandom(5 << 20)
        put = http.put("/slots/1/file", params={"path": "d/blob.bin"}, content=blob)
        assert put.status_code == 204
        assert http.get("/slots/1/file", params={"path": "d/blob.bin"}).content == blob
        assert http.get("/slots/1/file", params={"path": "nope"}).json()["error"] == "not_found"
        assert http.get("/slots/1/file", params={"path": "d"}).json()["error"] == "is_a_directory"
        esc = http.get("/slots/1/file", params={"path": "../../etc/passwd"})
        assert esc.status_code == 403
        assert esc.json()["error"] == "workspace_escape"
        archived = http.post("/slots/1/archive", json={"name": "ws.tar.gz"}).json()
        assert archived["name"] == "ws.tar.gz"
        listing = http.get("/artifacts").json()["artifacts"]
        assert [a["name"] for a in listing] == ["ws.tar.gz"]
        tar = http.get("/artifacts/ws.tar.gz").content
        assert tar[:2] == b"\x1f\x8b"  # gzip
        assert len(tar) == archived["size"]
        assert http.delete("/artifacts/ws.tar.gz").status_code == 204
        assert http.get("/artifacts/ws.tar.gz").status_code == 404
        assert http.post("/slots/1/reset").status_code == 204
        gone = http.post("/slots/1/exec", json={"command": "ls -A", "timeout": 10}).json()
        assert gone["stdout"] == ""


def test_sigterm_stops_commands_and_removes_workspaces(server: tuple[str, Path, Any]) -> None:
    url, data_dir, process = server
    with _client(url) as http:
        http.post("/slots/0/exec", json={"command": "(sleep 77.7 &) ; true", "timeout": 10})
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    # .bin (the seccomp program; a bwrap copy) is a cache kept on purpose
    assert [p.name for p in (data_dir / "hosts").iterdir() if p.name != ".bin"] == []


def test_missing_token_is_a_usage_error(sandbox_root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HERMES_SANDBOX_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "hermes_sandbox.cli", "serve", "--data-dir", str(sandbox_root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "HERMES_SANDBOX_TOKEN" in done.stderr
