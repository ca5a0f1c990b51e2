"""`uv run --package hermes-trainer apps/trainer [options]`: the closed RL loop."""

from hermes_trainer.cli import main

raise SystemExit(main())
