"""``process`` output -> ``<name>.report.html`` beside its JSONL (hermes-report: charts and the
token view), next to atroposlib's own ``<name>.html``."""

from __future__ import annotations

from pathlib import Path

from hermes_report import TOKENIZER_FILE, TokenTexts, atropos_records, write_report


def report_path(groups_path: Path) -> Path:
    """Where the report of ``groups_path`` goes (``data/x.jsonl`` -> ``data/x.report.html``)."""
    return groups_path.with_suffix(".report.html")


def write_process_report(groups_path: Path, tokenizer_dir: str | None) -> Path:
    """Render every group of ``groups_path``; token text from the tokenizer directory's
    ``tokenizer.json`` when it has one. Blocking."""
    tokenizer = Path(tokenizer_dir) / TOKENIZER_FILE if tokenizer_dir else None
    texts = TokenTexts.from_file(tokenizer) if tokenizer and tokenizer.is_file() else None
    return write_report(
        atropos_records(groups_path),
        report_path(groups_path),
        title=f"atropos process · {groups_path.name}",
        token_text=texts,
        special_ids=texts.special_ids if texts is not None else (),
    )
