"""`uv run --package hermes-trainer apps/trainer [options]`: the closed RL loop.

The trainer's dependencies (JAX, optax, tinker) stay out of the default `uv sync`, so from the
default environment (`uv run apps/trainer`) this says in one line what to type instead.
"""

import sys

try:
    from hermes_trainer.cli import main
except ModuleNotFoundError as exc:
    if exc.name != "hermes_trainer":
        raise
    print(
        "trainer: its dependencies are not in this environment; run "
        "`uv run --package hermes-trainer apps/trainer [options]` (docs/training.md)",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

raise SystemExit(main())
