"""tinker-cookbook and tinker, imported in one place. They live in a venv of their own
(.ci/tinker-cookbook.sh), not in the workspace mypy checks: their classes are ``Any`` here."""

from __future__ import annotations

import tinker  # type: ignore[import-not-found, unused-ignore]  # the trainer syncs it
from tinker_cookbook.completers import (  # type: ignore[import-not-found]
    TokenCompleter,
    TokensWithLogprobs,
)
from tinker_cookbook.rl.rollouts import do_group_rollout  # type: ignore[import-not-found]
from tinker_cookbook.rl.types import (  # type: ignore[import-not-found]
    Env,
    EnvGroupBuilder,
    StepResult,
)

__all__ = [
    "Env",
    "EnvGroupBuilder",
    "StepResult",
    "TokenCompleter",
    "TokensWithLogprobs",
    "do_group_rollout",
    "tinker",
]
