"""sales_report: total the paid sales of ``sales.csv`` per region into ``report.json``.

A worked hermes-rl environment plugin (docs/environments.md): items are generated from a seed
(train and test never share one), the workspace gets a CSV, the verifier reads the agent's
JSON from the same slot, and ``oracle_solution`` is a shell script that solves every item.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import (
    AgentResult,
    FailureKind,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
)

STATUSES = ("paid", "paid", "paid", "refunded", "pending")
SYSTEM = "You are a data analyst at a Linux terminal. The task's files are in the workspace."
TASK = (
    "sales.csv has the columns date,region,product,amount,status. Write report.json: a JSON "
    "object mapping every region that appears in sales.csv to the sum of the amounts of its "
    "rows whose status is paid (an integer; 0 for a region without paid rows)."
)
#: the oracle: sum paid amounts per region with awk and print them as a JSON object
ORACLE = r"""awk -F, 'NR > 1 { seen[$2] = 1; if ($5 == "paid") total[$2] += $4 }
END { printf "{"; n = 0
      for (r in seen) { printf "%s\"%s\": %d", (n++ ? ", " : ""), r, total[r] }
      print "}" }' sales.csv > report.json"""


@attrs.frozen
class SalesReportConfig:
    """``rows`` per CSV (at least 1) and the ``regions`` rows are drawn from."""

    rows: int = attrs.field(default=20, validator=attrs.validators.ge(1))
    regions: tuple[str, ...] = ("north", "south", "east", "west")
    toolsets: tuple[str, ...] = ("terminal", "file")


def _rows(data: Mapping[str, Any], regions: Sequence[str]) -> list[list[str]]:
    rng = random.Random(data["seed"])
    return [
        [f"2025-01-{day:02d}", rng.choice(regions), f"p{rng.randrange(9)}",
         str(rng.randrange(1, 500)), rng.choice(STATUSES)]
        for day in (rng.randrange(1, 29) for _ in range(int(data["rows"])))
    ]  # fmt: skip


class SalesReportEnv:
    """Total the paid sales of a CSV per region into report.json (terminal tool use)."""

    name = "sales_report"

    def __init__(self, config: SalesReportConfig) -> None:
        self.config = config

    @property
    def toolsets(self) -> Sequence[str]:
        return self.config.toolsets

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        rng = random.Random(f"sales:{seed}:{split}")
        for n in itertools.count():
            data = {"seed": rng.getrandbits(32), "rows": self.config.rows}
            yield Item(id=f"sales-{split}-{seed}-{n}", data=data, split=split)

    def expected(self, item: Item) -> dict[str, int]:
        totals: dict[str, int] = {}
        for _date, region, _product, amount, status in _rows(item.data, self.config.regions):
            totals[region] = totals.get(region, 0) + (int(amount) if status == "paid" else 0)
        return totals

    def prompt(self, item: Item) -> Sequence[Message]:
        return [Message.system(SYSTEM), Message.user(TASK)]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        lines = ["date,region,product,amount,status"]
        lines += [",".join(row) for row in _rows(item.data, self.config.regions)]
        await slot.write_file("sales.csv", ("\n".join(lines) + "\n").encode())
        return {"rows": len(lines) - 1}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        try:
            report = json.loads(await ctx.read_file("report.json"))
        except FileNotFoundError:
            return Score(reward=0.0, failure=FailureKind.MODEL, details="no report.json")
        except ValueError:
            return Score(reward=0.0, failure=FailureKind.MODEL, details="report.json is not JSON")
        expected = self.expected(item)
        right = sum(isinstance(report, dict) and report.get(k) == v for k, v in expected.items())
        solved = report == expected
        return Score(
            reward=1.0 if solved else 0.0,
            metrics={"regions_right": right / len(expected)},
            failure=None if solved else FailureKind.MODEL,
            details="" if solved else f"{right}/{len(expected)} regions right",
        )

    def oracle_solution(self, item: Item) -> str:
        return ORACLE
