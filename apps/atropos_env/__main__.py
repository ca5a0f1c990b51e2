"""`uv run apps/atropos_env serve|process|evaluate ...`: the Atropos environment adapter."""

from hermes_atropos_env.cli import main

raise SystemExit(main())
