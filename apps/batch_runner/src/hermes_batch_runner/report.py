"""``report.html``: a static, offline page to browse rollouts (no scripts, no external assets).

Every value from a rollout goes through :func:`html.escape`, so model output cannot inject
markup into the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:70rem;color:#222}
summary{cursor:pointer;padding:.3rem 0}
.r{font-family:monospace}.kept{color:#060}.failed{color:#a00}.filtered{color:#a60}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5rem;margin:.2rem 0}
.msg{border-left:3px solid #ccc;padding-left:.6rem;margin:.6rem 0}
.assistant{border-color:#36c}.tool{border-color:#6a6}.user{border-color:#c63}
.reasoning pre{background:#fff8e0}.call pre{background:#eef4ff}
table{border-collapse:collapse}
td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;text-align:left}
"""


def _e(value: object) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _pretty_arguments(arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def _message_html(message: Mapping[str, Any]) -> str:
    role = str(message.get("role", "?"))
    parts = [f'<div class="msg {_e(role)}"><b>{_e(role)}</b>']
    if role == "tool":
        parts.append(f" <i>{_e(message.get('name') or '')} ({_e(message.get('tool_call_id'))})</i>")
    reasoning = message.get("reasoning_content")
    if reasoning:
        parts.append(f'<div class="reasoning">reasoning<pre>{_e(reasoning)}</pre></div>')
    content = message.get("content")
    if content:
        parts.append(f"<pre>{_e(content)}</pre>")
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(
            f'<div class="call">tool call <b>{_e(function.get("name", "?"))}</b> '
            f"({_e(call.get('id', ''))})<pre>{_e(_pretty_arguments(function.get('arguments')))}"
            "</pre></div>"
        )
    parts.append("</div>")
    return "".join(parts)


def _rollout_html(record: Mapping[str, Any], status: str) -> str:
    reward = record.get("reward")
    reward_text = "—" if reward is None else f"{reward:.3f}"
    head = (
        f'<summary><span class="r">{_e(record.get("id"))}</span> '
        f'<span class="{status}">{status}</span> reward {_e(reward_text)} · '
        f"{_e(record.get('stop_reason') or '')} · {_e(record.get('turns', 0))} turns · "
        f"{len(record.get('tool_errors') or [])} tool errors</summary>"
    )
    body = []
    if record.get("failure"):
        body.append(f"<p>failure: <pre>{_e(json.dumps(record['failure'], indent=2))}</pre></p>")
    if record.get("filter_reason"):
        body.append(f"<p>filtered: {_e(record['filter_reason'])}</p>")
    if record.get("metrics"):
        body.append(f"<p>metrics: <code>{_e(record['metrics'])}</code></p>")
    for error in record.get("tool_errors") or []:
        body.append(f"<p>tool error: <code>{_e(error)}</code></p>")
    body.extend(_message_html(m) for m in record.get("messages") or [] if isinstance(m, dict))
    return f"<details>{head}{''.join(body)}</details>"


def render_report(
    *,
    title: str,
    summary: Mapping[str, Any],
    groups: Iterable[tuple[str, Sequence[Mapping[str, Any]]]],
    limit: int = 1000,
    total: int | None = None,
) -> str:
    """The full HTML page: the summary table then up to ``limit`` rollouts of ``groups``
    (``total`` says how many rollouts the run has when ``groups`` is only a sample)."""
    counts = summary.get("counts", {})
    reward = summary.get("reward", {})
    rows = [
        ("finished / expected", f"{counts.get('finished')} / {counts.get('expected')}"),
        (
            "kept / failed / filtered",
            f"{counts.get('kept')} / {counts.get('failed')} / {counts.get('filtered')}",
        ),
        ("mean reward", reward.get("mean")),
        ("pass rate", reward.get("pass_rate")),
        ("generated tokens", summary.get("tokens", {}).get("generated")),
    ]
    table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    shown: list[str] = []
    seen = 0
    for status, records in groups:
        for record in records:
            seen += 1
            if len(shown) < limit:
                shown.append(_rollout_html(record, status))
    total = max(total, seen) if total is not None else seen
    more = f"<p>{total - len(shown)} more rollouts not shown.</p>" if total > len(shown) else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{_e(title)}</h1><table>{table}</table>"
        f"<h2>Rollouts</h2>{''.join(shown)}{more}</body></html>\n"
    )
