"""What the launchers of our adapters for other projects' venvs (TRL, verifiers, tinker-cookbook)
share: this checkout's workspace packages (``uv sync``) and the adapter's sources go on
``sys.path`` *after* the venv's own, so that project keeps the versions it runs with and ours
come from the checkout."""

from __future__ import annotations

import site
import sys
from pathlib import Path


def join_workspace(launcher: str) -> None:
    """Put the workspace's site-packages and the ``src`` beside ``launcher`` (the launcher's
    ``__file__``, in ``apps/<adapter>/``) on ``sys.path``; exit with a one-line error when the
    workspace is not synced."""
    here = Path(launcher).resolve().parent
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    workspace = here.parent.parent / ".venv" / "lib" / version / "site-packages"
    if not workspace.is_dir():
        name = Path(launcher).name
        sys.exit(f"{name}: no workspace environment at {workspace}: run `uv sync` first")
    site.addsitedir(str(workspace))
    sys.path.append(str(here / "src"))
