"""docs/atropos.md's ``--env.*`` table gives the defaults the config class has (the embedded
model's smaller budgets are documented apart)."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_atropos_env import HermesAtroposEnvConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "atropos.md"


def documented_defaults() -> dict[str, str]:
    """Each ``--env.*`` field of the table with a number as its default: a row naming several
    fields pairs them in order with its defaults (``4, 1, 4`` or ``120 / 3600``)."""
    out: dict[str, str] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        names: list[str] = re.findall(r"`([a-z_]+)`", cells[0].split("(")[0])
        defaults = [d.strip() for d in re.split(r"[,/]", cells[1])]
        if len(names) != len(defaults) or not all(
            n in HermesAtroposEnvConfig.model_fields for n in names
        ):
            continue
        out.update(
            (n, d) for n, d in zip(names, defaults, strict=True) if re.fullmatch(r"[\d.]+", d)
        )
    return out


def test_the_docs_table_gives_the_config_defaults() -> None:
    documented = documented_defaults()
    assert {"max_agent_turns", "max_tokens_per_turn", "slots_per_container"} <= set(documented)
    fields = HermesAtroposEnvConfig.model_fields
    assert {n: float(d) for n, d in documented.items()} == {
        n: float(fields[n].default) for n in documented
    }
