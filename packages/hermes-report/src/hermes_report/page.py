"""The report page: one self-contained HTML file (inline CSS, JS and SVG; no network).

The overview is static HTML; the rollout list is one compact JSON array (``#rows``) the
explorer script filters and pages; each rollout's detail is its own JSON element (``#d<N>``),
parsed only when that rollout is opened, so a page of thousands of rollouts opens fast.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from hermes_report.model import detail, row, to_json, token_track
from hermes_report.overview import Overview

TokenText = Callable[[Sequence[int]], list[str]]
"""Each token's text, one string per id (the caller owns the tokenizer)."""

# no network of any kind, whatever a record contains
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


def _asset(name: str) -> str:
    return resources.files("hermes_report").joinpath("assets", name).read_text(encoding="utf-8")


_CONTROLS = """
<div id="controls">
<select id="f-status"></select><select id="f-stop"></select><select id="f-family"></select>
<label><input type="checkbox" id="f-toolerr"> tool errors</label>
<label><input type="checkbox" id="f-drift"> drift</label>
<label>sort <select id="f-sort">
<option value="order">file order</option><option value="reward-desc">reward ↓</option>
<option value="reward-asc">reward ↑</option><option value="turns">turns ↓</option>
<option value="tokens">tokens ↓</option><option value="tool-errors">tool errors ↓</option>
<option value="drift">drift ↓</option></select></label>
<input id="f-search" type="search" placeholder="id contains…">
</div>
<div class="pager"><button id="prev">‹ prev</button> <span id="shown"></span>
<button id="next">next ›</button></div>
<table id="list"><thead><tr><th>id</th><th>outcome</th><th>reward</th><th>stop</th>
<th>family</th><th>difficulty</th><th>turns</th><th>model's tool calls / failed</th>
<th>trainable / tokens</th><th>drifted tokens</th></tr></thead>
<tbody id="list-body"></tbody></table>
"""


def render_report(
    records: Iterable[Mapping[str, Any]],
    *,
    title: str = "hermes-rl rollouts",
    token_text: TokenText | None = None,
    special_ids: Iterable[int] = (),
) -> str:
    """The whole page for ``records`` (consumed once, in order)."""
    specials = frozenset(special_ids)
    overview = Overview()
    rows: list[dict[str, Any]] = []
    details: list[str] = []
    used_ids: set[int] = set()
    for index, record in enumerate(records):
        track = token_track(record)
        entry = row(index, record, track)
        overview.add(record, entry)
        rows.append(entry)
        if track is not None:
            used_ids.update(track.ids)
        details.append(
            f'<script type="application/json" id="d{index}">'
            f"{to_json(detail(record, track, specials))}</script>"
        )
    vocab: dict[str, str] | None = None
    if token_text is not None:
        ordered = sorted(used_ids)
        vocab = {str(i): text for i, text in zip(ordered, token_text(ordered), strict=True)}
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>",
            f"<header><h1>{escape(title)}</h1></header>",
            f'<section id="overview"><h2>Overview</h2>{overview.html()}</section>',
            f'<section id="explorer"><h2>Rollouts</h2>{_CONTROLS}</section>',
            '<section id="rollout" hidden></section>',
            f'<script type="application/json" id="rows">{to_json(rows)}</script>',
            f'<script type="application/json" id="vocab">{to_json(vocab)}</script>',
            *details,
            f"<script>{_asset('report.js')}</script></body></html>\n",
        ]
    )


def write_report(
    records: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "hermes-rl rollouts",
    token_text: TokenText | None = None,
    special_ids: Iterable[int] = (),
) -> Path:
    """Render ``records`` and replace ``path`` atomically (a reader never sees half a page).

    Blocking (builds the page, writes the file): call it through ``anyio.to_thread`` from async
    code.
    """
    target = Path(path)
    page = render_report(records, title=title, token_text=token_text, special_ids=special_ids)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
