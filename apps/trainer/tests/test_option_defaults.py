"""The trainer's shared options default to and describe themselves with hermes_rollouts' one
table, and docs/training.md's quick start passes the recipe its measured curve used."""

from __future__ import annotations

from pathlib import Path

from hermes_rollouts import OPTION_DEFAULTS
from hermes_trainer.cli import build_parser
from hermes_trainer.config import recipe_options

DOC = Path(__file__).resolve().parents[3] / "docs" / "training.md"


def test_the_shared_options_default_to_the_table() -> None:
    actions = {a.option_strings[0]: a for a in build_parser()._actions if a.option_strings}
    shared = [row for row in OPTION_DEFAULTS if row.option in actions]
    assert {r.option for r in shared} >= {"--temperature", "--max-turns", "--context-tokens"}
    for row in shared:
        assert actions[row.option].default == row.value, row.option
        help_text = actions[row.option].help or ""
        assert help_text == row.help or help_text.endswith(f"(default {row.value})"), row.option


def test_the_quick_start_passes_the_measured_recipe() -> None:
    command = " ".join(DOC.read_text(encoding="utf-8").split("```bash")[1].split())
    assert f"apps/trainer --threads 1 \\ {recipe_options()}" in command
