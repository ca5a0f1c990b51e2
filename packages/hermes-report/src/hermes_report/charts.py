"""Small inline-SVG charts (horizontal bars, histograms, a line), every label escaped.

Each function returns one ``<figure class="chart" data-chart=NAME>`` element; an empty input
gives the figure with a "no data" note instead of an empty plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 360
BAR_H = 14
GAP = 6
LABEL_H = 13  # a bar's label is a line of its own above it: never cut, however long


def _figure(name: str, title: str, body: str) -> str:
    return (
        f'<figure class="chart" data-chart="{escape(name)}">'
        f"<figcaption>{escape(title)}</figcaption>{body}</figure>"
    )


def _empty(name: str, title: str, note: str = "no data in these records") -> str:
    return _figure(name, title, f'<p class="nodata">{escape(note)}</p>')


def _num(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.3g}"


def bars(
    name: str,
    title: str,
    items: Sequence[tuple[str, float, str]],
    *,
    max_value: float | None = None,
) -> str:
    """Horizontal bars: ``(label, value, value_text)`` each; ``max_value`` fixes the scale
    (1.0 for rates)."""
    if not items:
        return _empty(name, title)
    top = max_value if max_value is not None else max(v for _, v, _ in items)
    top = top if top > 0 else 1.0
    span = WIDTH - 80
    row_h = LABEL_H + BAR_H + GAP
    height = len(items) * row_h
    rows = []
    for n, (label, value, text) in enumerate(items):
        y = n * row_h
        w = max(0.0, value) / top * span
        rows.append(
            f'<g class="bar"><title>{escape(label)}: {escape(text)}</title>'
            f'<text x="0" y="{y + 10}">{escape(label)}</text>'
            f'<rect x="0" y="{y + LABEL_H}" width="{w:.1f}" height="{BAR_H}"></rect>'
            f'<text x="{w + 4:.1f}" y="{y + LABEL_H + 11}">{escape(text)}</text></g>'
        )
    svg = (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img">{"".join(rows)}</svg>'
    )
    return _figure(name, title, svg)


def _bins(values: Sequence[float], count: int) -> tuple[list[int], float, float]:
    low, high = min(values), max(values)
    if high == low:
        return [len(values)], low, high
    width = (high - low) / count
    counts = [0] * count
    for v in values:
        counts[min(count - 1, int((v - low) / width))] += 1
    return counts, low, high


def histogram(
    name: str, title: str, values: Sequence[float], *, bins: int = 20, integer: bool = False
) -> str:
    """Column histogram of ``values``; ``integer`` gives one column per integer value when
    the range is small (turns, tool calls)."""
    if not values:
        return _empty(name, title)
    low, high = min(values), max(values)
    if integer and high - low < 40:
        width = int(high - low) + 1
        counts = [0] * width
        for v in values:
            counts[int(v - low)] += 1
        labels = [_num(low + k) for k in range(width)]
    else:
        counts, low, high = _bins(values, bins)
        step = (high - low) / len(counts) if high > low else 0.0
        labels = [
            f"{_num(low + k * step)}–{_num(low + (k + 1) * step)}" for k in range(len(counts))
        ]
    height, base = 120, 100
    top = max(counts)
    col = (WIDTH - 20) / len(counts)
    cols = []
    for k, c in enumerate(counts):
        h = c / top * (base - 10)
        x = 10 + k * col
        cols.append(
            f'<g class="col"><title>{escape(labels[k])}: {c}</title>'
            f'<rect x="{x + 1:.1f}" y="{base - h:.1f}" width="{max(col - 2, 1):.1f}" '
            f'height="{h:.1f}"></rect></g>'
        )
    axis = (
        f'<line x1="10" y1="{base}" x2="{WIDTH - 10}" y2="{base}"></line>'
        f'<text x="10" y="{base + 14}">{escape(_num(low))}</text>'
        f'<text x="{WIDTH - 10}" y="{base + 14}" text-anchor="end">{escape(_num(high))}</text>'
        f'<text x="{WIDTH / 2}" y="{base + 14}" text-anchor="middle">n={len(values)}, '
        f"max {top}/bin</text>"
    )
    svg = (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img">'
        f"{''.join(cols)}{axis}</svg>"
    )
    return _figure(name, title, svg)


def line(
    name: str, title: str, points: Sequence[tuple[float, float]], *, x_label: str, y_label: str
) -> str:
    """A polyline through ``points`` (sorted by x), axes labelled with their ranges."""
    if len(points) < 2:
        return _empty(name, title, "fewer than two timestamped rollouts")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y1 = min(xs), max(xs), max(ys)
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > 0 else 1
    height, base, left = 130, 105, 30
    path = " ".join(
        f"{left + (x - x0) / (x1 - x0) * (WIDTH - left - 10):.1f},{base - y / y1 * (base - 10):.1f}"
        for x, y in points
    )
    svg = (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img">'
        f'<polyline points="{path}"></polyline>'
        f'<line x1="{left}" y1="{base}" x2="{WIDTH - 10}" y2="{base}"></line>'
        f'<line x1="{left}" y1="10" x2="{left}" y2="{base}"></line>'
        f'<text x="{left - 3}" y="16" text-anchor="end">{escape(_num(y1))}</text>'
        f'<text x="{left}" y="{base + 14}">0</text>'
        f'<text x="{WIDTH - 10}" y="{base + 14}" text-anchor="end">'
        f"{escape(_num(math.ceil(x1 - x0)))} {escape(x_label)}</text>"
        f'<text x="{left + 4}" y="24">{escape(y_label)}</text></svg>'
    )
    return _figure(name, title, svg)


def by_step(
    name: str,
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[int, float, str]]]],
    *,
    max_value: float = 1.0,
) -> str:
    """One polyline per ``(series name, points)`` over the steps, each point ``(step, value,
    label)`` a dot with the tooltip ``series step N: label``; the y scale is 0 to
    ``max_value`` (or the largest value above it)."""
    steps = [s for _, points in series for s, _, _ in points]
    if not steps:
        return _empty(name, title)
    x0, x1 = min(steps), max(steps)
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = max([max_value, *(v for _, points in series for _, v, _ in points)])
    height, base, left = 150, 105, 30

    def at(step: int, value: float) -> tuple[float, float]:
        x = left + (step - x0) / (x1 - x0) * (WIDTH - left - 10)
        return x, base - max(0.0, value) / y1 * (base - 10)

    body = []
    for index, (label, points) in enumerate(series):
        ordered = sorted(points)
        xy = [at(s, v) for s, v, _ in ordered]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        dots = "".join(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{escape(label)} step {s}: '
            f"{escape(text)}</title></circle>"
            for (x, y), (s, _, text) in zip(xy, ordered, strict=True)
        )
        body.append(
            f'<g class="series s{index}" data-series="{escape(label)}">'
            f'<polyline points="{line}"></polyline>{dots}'
            f'<text x="{left + 4 + 120 * index}" y="{height - 4}">● {escape(label)}</text></g>'
        )
    svg = (
        f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img">'
        f'<line x1="{left}" y1="{base}" x2="{WIDTH - 10}" y2="{base}"></line>'
        f'<line x1="{left}" y1="10" x2="{left}" y2="{base}"></line>'
        f'<text x="{left - 3}" y="16" text-anchor="end">{escape(_num(y1))}</text>'
        f'<text x="{left - 3}" y="{base}" text-anchor="end">0</text>'
        f'<text x="{left}" y="{base + 14}">step {x0}</text>'
        f'<text x="{WIDTH - 10}" y="{base + 14}" text-anchor="end">step {x1}</text>'
        f"{''.join(body)}</svg>"
    )
    return _figure(name, title, svg)
