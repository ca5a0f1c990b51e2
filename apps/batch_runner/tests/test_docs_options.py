"""docs/batch_runner.md's option table gives the defaults ``--help`` gives, and ``--help``
gives the defaults the run uses (RunConfig)."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_batch_runner.cli import build_parser
from hermes_batch_runner.config import RunConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "batch_runner.md"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def documented_defaults() -> dict[str, str]:
    """Each option of the table with a number as its default: a row listing several options
    pairs them in order with its comma-separated defaults."""
    out: dict[str, str] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `--"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        options = re.findall(r"`(--[a-z][a-z-]*)", cells[0])
        defaults = [d.strip() for d in cells[1].split(",")]
        pairs = zip(options, defaults, strict=False) if len(options) == len(defaults) else []
        if len(options) == 1 and defaults:
            pairs = [(options[0], defaults[0])]
        for option, default in pairs:
            found = NUMBER.match(default)
            if found:
                out[option] = found.group()
    return out


def help_defaults() -> dict[str, tuple[str, str]]:
    """``--option -> (dest, number)`` for every option whose help ends with its default in
    parentheses, e.g. ``turns per rollout (4)`` or ``items to run (env default 4)``."""
    out: dict[str, tuple[str, str]] = {}
    for action in build_parser()._actions:
        found = re.search(r"\((?:[a-z ]+ )?(-?\d+(?:\.\d+)?)\)$", action.help or "")
        if found and action.option_strings:
            out[action.option_strings[0]] = (action.dest, found.group(1))
    return out


def test_the_docs_table_gives_the_defaults_help_gives() -> None:
    documented, helped = documented_defaults(), help_defaults()
    assert {"--num-items", "--max-turns", "--max-tokens", "--concurrency"} <= set(documented)
    shared = sorted(set(documented) & set(helped))
    assert len(shared) >= 10
    assert {o: documented[o] for o in shared} == {o: helped[o][1] for o in shared}


def test_help_gives_the_defaults_a_run_uses() -> None:
    config = RunConfig()
    for option, (dest, number) in help_defaults().items():
        used = config.item_limit if dest == "num_items" else getattr(config, dest)
        assert float(number) == used, option
