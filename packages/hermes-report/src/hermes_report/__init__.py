"""hermes-report: one static, self-contained HTML report of hermes-rl rollouts.

``write_report(records, path, token_text=...)`` renders records (batch-runner records or
Atropos group members) with an overview of charts and a rollout explorer with a token view;
``records_from(path)`` reads a run directory or an Atropos JSONL; ``TokenTexts`` gives token
text from a ``tokenizer.json``. The ``hermes-report`` command does all three.
"""

from hermes_report.model import status_of, token_track
from hermes_report.page import TokenText, render_report, write_report
from hermes_report.sources import (
    TOKENIZER_FILE,
    ReportSourceError,
    atropos_records,
    group_records,
    records_from,
    run_dir_records,
)
from hermes_report.tokens import TokenizerFileError, TokenTexts

__all__ = [
    "TOKENIZER_FILE",
    "ReportSourceError",
    "TokenText",
    "TokenTexts",
    "TokenizerFileError",
    "atropos_records",
    "group_records",
    "records_from",
    "render_report",
    "run_dir_records",
    "status_of",
    "token_track",
    "write_report",
]
