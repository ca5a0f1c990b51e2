"""Command line of the Atropos adapter (its behaviour lands with the atropos_env issue)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

DESCRIPTION = """\
Run a hermes-envs environment as an Atropos (atroposlib 0.4.0) environment.

  serve     register with a running `run-api` and stream scored groups to the trainer
  process   generate groups offline and write them as JSONL plus an HTML view
  evaluate  run the environment's eval split and write metrics and samples

Not implemented yet: this command only describes what it will do.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="atropos_env",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["serve", "process", "evaluate"])
    args = parser.parse_args(argv)
    print(f"atropos_env {args.command}: not implemented yet", file=sys.stderr)
    return 2
