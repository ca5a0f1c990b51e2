from __future__ import annotations

import re

from hermes_report import charts
from hypothesis import given
from hypothesis import strategies as st


def test_bar_labels_are_escaped() -> None:
    svg = charts.bars("x", "<t>", [("<img src=x>", 2.0, "2"), ("b", 1.0, "1")])
    assert "<img" not in svg
    assert "&lt;img src=x&gt;" in svg
    assert "<figcaption>&lt;t&gt;</figcaption>" in svg
    assert svg.count("<rect") == 2


def test_empty_charts_say_so() -> None:
    assert "no data" in charts.bars("x", "t", [])
    assert "no data" in charts.histogram("x", "t", [])
    assert "fewer than two" in charts.line("x", "t", [(0.0, 1.0)], x_label="s", y_label="n")


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200), st.integers(1, 30))
def test_histogram_bins_hold_every_value(values: list[float], bins: int) -> None:
    svg = charts.histogram("h", "t", values, bins=bins)
    counts = [int(c) for c in re.findall(r": (\d+)</title>", svg)]
    assert sum(counts) == len(values)


def test_integer_histogram_has_one_column_per_value() -> None:
    svg = charts.histogram("turns", "t", [1, 1, 2, 4], integer=True)
    assert re.findall(r"<title>(\d+): (\d+)</title>", svg) == [
        ("1", "2"), ("2", "1"), ("3", "0"), ("4", "1"),
    ]  # fmt: skip


def test_a_long_bar_label_is_shown_whole() -> None:
    label = "failed: infrastructure:sandbox_acquire"
    svg = charts.bars("status", "t", [(label, 1.0, "1")])
    assert f">{label}</text>" in svg
