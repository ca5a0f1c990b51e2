"""The long commands' progress display: what it shows on a terminal, and nothing when off."""

from __future__ import annotations

import io

from hermes_rollouts import progress_bar
from rich.console import Console


def _shown(enabled: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    progress = progress_bar("rollouts", console=console, enabled=enabled)
    with progress:
        task = progress.add_task("rollouts", total=3, detail="")
        progress.update(task, advance=2, detail="kept 2 failed 0")
        progress.refresh()
    return out.getvalue()


def test_it_shows_the_unit_the_count_and_the_detail() -> None:
    lines = [line for line in _shown(enabled=True).splitlines() if "2/3" in line]
    assert lines
    shown = lines[-1]
    assert "rollouts" in shown
    assert "kept 2 failed 0" in shown
    assert "0:00:0" in shown  # the time elapsed


def test_it_shows_nothing_when_disabled() -> None:
    assert _shown(enabled=False).strip() == ""
