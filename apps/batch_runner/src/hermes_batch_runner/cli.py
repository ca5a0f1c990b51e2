"""Command line of the batch runner (its behaviour lands with the batch_runner issue)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

DESCRIPTION = """\
Generate trajectories from an environment or a JSONL dataset with a tool-using agent in
sandboxes, verified and scored; resumable and exactly-once.

Not implemented yet: this command only describes what it will do.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="batch_runner", description=DESCRIPTION)
    parser.parse_args(argv)
    print("batch_runner: not implemented yet", file=sys.stderr)
    return 2
