"""``hermes-report PATH [-o OUT] [--tokenizer tokenizer.json] [--title TEXT]``.

PATH is a batch-runner run directory (its ``tokenizer.json`` is used when present), a
trainer's ``--output`` (its ``rollouts/`` run directory) or an Atropos ``process`` JSONL; OUT
defaults to ``report.html`` in the run directory and ``PATH`` with ``.html`` beside a JSONL.
Without a tokenizer the token view shows ids.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hermes_protocols.formats import FormatVersionError, RunDirectory

from hermes_report.page import write_report
from hermes_report.sources import TOKENIZER_FILE, ReportSourceError, records_from, run_root
from hermes_report.tokens import TokenizerFileError, TokenTexts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-report",
        description="Render one self-contained HTML report of a run directory or Atropos JSONL.",
    )
    parser.add_argument(
        "path", type=Path, help="run directory, trainer --output directory or JSONL file"
    )
    parser.add_argument("-o", "--output", type=Path, help="the HTML file to write")
    parser.add_argument(
        "--tokenizer", type=Path, help="tokenizer.json for token text (default: PATH's, if any)"
    )
    parser.add_argument("--title", help="page title (default: the path)")
    return parser


def default_output(path: Path) -> Path:
    """Where the report goes when ``-o`` is not given."""
    return RunDirectory(run_root(path)).report if path.is_dir() else path.with_suffix(".html")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path: Path = args.path
    tokenizer: Path | None = args.tokenizer
    if tokenizer is None and path.is_dir() and (run_root(path) / TOKENIZER_FILE).is_file():
        tokenizer = run_root(path) / TOKENIZER_FILE
    try:
        texts = TokenTexts.from_file(tokenizer) if tokenizer is not None else None
        out = write_report(
            records_from(path),
            args.output or default_output(path),
            title=args.title or str(path),
            token_text=texts,
            special_ids=texts.special_ids if texts else (),
        )
    except (ReportSourceError, TokenizerFileError, FormatVersionError, OSError) as exc:
        print(f"hermes-report: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
