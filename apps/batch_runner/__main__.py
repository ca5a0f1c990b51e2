"""`uv run apps/batch_runner [options]`: resumable, concurrent trajectory generation."""

from hermes_batch_runner.cli import main

raise SystemExit(main())
