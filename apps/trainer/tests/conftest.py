"""The trainer's tests need its own dependencies (JAX, optax, tinker), which the default
``uv sync`` leaves out (``uv sync --inexact --package hermes-trainer`` adds them; ``nox -s
tests`` does): without them this directory is skipped, e.g. by ``nox -s unit``."""

from __future__ import annotations

import pytest

pytest.importorskip("hermes_trainer")
