"""verifiers' v1 stack (``import verifiers.v1 as vf``), imported in one place. It lives in a venv
of its own (.ci/verifiers.sh), not in the workspace mypy checks, and ships no type information
anyway: its classes are ``Any`` to mypy."""

from __future__ import annotations

import verifiers.v1 as vf  # type: ignore[import-not-found]

__all__ = ["vf"]
