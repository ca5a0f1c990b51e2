"""Open a report in headless Chromium: its rendered DOM or a screenshot (tests, benchmark,
docs). Blocking; each call starts a fresh browser with a throwaway profile and no network."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
)


class BrowserError(Exception):
    """Chromium is missing, failed, or timed out; the message says which."""


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``), if any."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout_s: float) -> str:
    binary = find_chromium()
    if binary is None:
        raise BrowserError("no chromium on PATH: install it (.ci/chromium.sh)")
    with tempfile.TemporaryDirectory(prefix="hermes-report-chromium-") as profile:
        try:
            done = subprocess.run(
                [binary, *_FLAGS, f"--user-data-dir={profile}", *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BrowserError(f"chromium did not finish within {timeout_s}s") from exc
    if done.returncode != 0:
        raise BrowserError(f"chromium exited {done.returncode}: {done.stderr[-500:]}")
    return done.stdout


def url_of(path: Path, fragment: str = "") -> str:
    """The ``file://`` URL of ``path`` with an optional ``#fragment`` (``r=3`` opens one)."""
    return path.resolve().as_uri() + (f"#{fragment}" if fragment else "")


def dump_dom(url: str, *, timeout_s: float = 60.0) -> str:
    """The DOM after the page's load event (its scripts have run)."""
    return _run(["--dump-dom", url], timeout_s)


def screenshot(url: str, target: Path, *, size: tuple[int, int], timeout_s: float = 60.0) -> Path:
    """A PNG of the page at ``size`` (width, height) pixels."""
    _run([f"--screenshot={target.resolve()}", f"--window-size={size[0]},{size[1]}", url], timeout_s)
    if not target.is_file():
        raise BrowserError(f"chromium wrote no screenshot to {target}")
    return target
