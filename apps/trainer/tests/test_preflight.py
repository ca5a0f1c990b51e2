"""The source check waits a few seconds for a server started beside the trainer (the documented
``run-api &`` then ``apps/trainer --atropos-url ...``), and no longer."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from hermes_protocols import ConfigError
from hermes_trainer import preflight

pytestmark = pytest.mark.slow  # the trainer's dependencies


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)  # any answer will do
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_server_that_starts_listening_two_seconds_later_is_reachable() -> None:
    port = _free_port()
    servers: list[HTTPServer] = []

    def start_late() -> None:
        time.sleep(2.0)
        server = HTTPServer(("127.0.0.1", port), _Hello)
        servers.append(server)
        server.serve_forever()

    thread = threading.Thread(target=start_late, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        preflight._reachable(f"http://127.0.0.1:{port}", "--atropos-url")
    finally:
        while not servers and thread.is_alive():
            time.sleep(0.05)
        for server in servers:
            server.shutdown()
            server.server_close()
    assert 2.0 <= time.monotonic() - started < preflight.CONNECT_TIMEOUT_S


def test_nobody_listening_fails_after_the_wait_naming_the_option() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"--atropos-url .*start the server or fix --atropos-url"):
        preflight._reachable(f"http://127.0.0.1:{_free_port()}", "--atropos-url")
    assert time.monotonic() - started >= preflight.CONNECT_TIMEOUT_S
