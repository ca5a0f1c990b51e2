"""One default per shared setting: the table in ``hermes_rollouts.option_defaults`` is what
docs/architecture.md shows, what the spec sections default to, and what the batch runner's and
the Atropos adapter's options default to and say in their help (the trainer's own test checks
its options)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hermes_atropos_env import HermesAtroposEnvConfig
from hermes_batch_runner.cli import build_parser
from hermes_batch_runner.config import RunConfig
from hermes_rollouts import OPTION_DEFAULTS, OptionDefault, RolloutSpec

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
ROW = re.compile(r"^\| `(--[a-z-]+)`(?: \(`([a-z_]+)`\))? \| `?([^|`]+)`? \| ([^|]+) \|$")


def documented() -> dict[str, tuple[str | None, str, str]]:
    """docs/architecture.md's table: option -> (Atropos field, default, meaning)."""
    text = DOC.read_text(encoding="utf-8").split("### One default per setting")[1]
    rows = (ROW.match(line.strip()) for line in text.split("\n## ")[0].splitlines())
    return {m[1]: (m[2], m[3].strip(), m[4].strip()) for m in rows if m}


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_the_docs_table_is_the_code_table() -> None:
    rows = documented()
    assert list(rows) == [d.option for d in OPTION_DEFAULTS]
    for row in OPTION_DEFAULTS:
        _field, default, meaning = rows[row.option]
        value = row.value if isinstance(row.value, float) else str(row.value)
        assert (float(default) if isinstance(row.value, float) else default) == value
        assert meaning == row.meaning, row.option


@pytest.mark.parametrize("row", OPTION_DEFAULTS, ids=lambda r: r.option)
def test_the_spec_sections_default_to_the_table(row: OptionDefault[object]) -> None:
    spec = RolloutSpec()
    in_spec = {
        "--env": spec.environment.name,
        "--temperature": spec.sampling.temperature,
        "--max-turns": spec.budgets.max_turns,
        "--max-tokens": spec.budgets.max_tokens_per_turn,
        "--context-tokens": spec.model.context_tokens,
        "--command-timeout": spec.toolsets.command_timeout_s,
        "--parser": spec.parser,
        "--sandbox": spec.sandbox.kind,
        "--sandbox-slots": spec.pool.slots_per_host,
    }
    if row.option not in in_spec:
        pytest.skip(f"{row.option} is not a spec field (the apps give it to the run)")
    assert in_spec[row.option] == row.value


@pytest.mark.parametrize("row", OPTION_DEFAULTS, ids=lambda r: r.option)
def test_the_batch_runner_defaults_and_helps_with_the_table(row: OptionDefault[object]) -> None:
    field = row.option[2:].replace("-", "_")
    assert getattr(RunConfig(), field) == row.value
    (action,) = [a for a in build_parser()._actions if row.option in a.option_strings]
    assert action.help is not None
    assert action.help.endswith(f"({_shown(row.value)})") or action.help.endswith(
        f"(default {_shown(row.value)})"
    )


@pytest.mark.parametrize("row", OPTION_DEFAULTS, ids=lambda r: r.option)
def test_the_atropos_fields_default_to_the_table(row: OptionDefault[object]) -> None:
    field, _default, _meaning = documented()[row.option]
    if field is None:
        pytest.skip(f"the Atropos adapter has no {row.option}")
    assert HermesAtroposEnvConfig.model_fields[field].default == row.value
