"""The environment check's setup check: two rollouts of one item at once, each on its own fresh
slot, through the runner's own acquire and setup phase (its setup timeout); an agent that only
lists the workspace. Both setups must succeed with the same metadata and the same files
(outside ``.git``: commit objects hold timestamps)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from hermes_envs import RolloutRunner, RunnerConfig
from hermes_protocols import (
    AgentResult,
    Environment,
    Item,
    Message,
    ScoredRollout,
    SlotPool,
    StopReason,
    ToolExecutor,
    ToolSchema,
    Toolset,
)

from hermes_rollouts.check_report import CheckResult, Status

SETUP = "setup_workspace in time, repeatable"
#: every directory and every file's checksum, outside .git
FINGERPRINT = (
    "find . -path ./.git -prune -o -type d -print -o -type f -exec cksum {} + | LC_ALL=C sort"
)


class _ListWorkspace:
    """An agent that lists the workspace once with the ``terminal`` tool."""

    def __init__(self) -> None:
        self.listing: str | None = None

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        result = await executor("terminal", {"command": FINGERPRINT, "timeout": 120})
        if result.metadata.get("exit_code") == 0:
            self.listing = result.content
        return AgentResult(messages=list(messages), stop_reason=StopReason.FINAL_ANSWER, turns=0)


async def check_setup(
    env: Environment,
    pool: SlotPool,
    item: Item,
    terminal: Sequence[Toolset],
    config: RunnerConfig,
) -> CheckResult:
    """Set ``item`` up twice at once and compare (see the module doc)."""
    agents = (_ListWorkspace(), _ListWorkspace())
    rollouts: list[ScoredRollout] = []

    async def one(agent: _ListWorkspace, index: int) -> None:
        runner = RolloutRunner(env, pool, agent, terminal, config=config)
        rollouts.append(await runner.run_rollout(item, terminal, group_index=index))

    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for index, agent in enumerate(agents):
            tg.start_soon(one, agent, index)
    seconds = anyio.current_time() - started
    for rollout in rollouts:
        failure = rollout.failure
        if failure is not None and failure.phase in ("acquire", "setup"):
            detail = f"item {item.id!r}: {failure.phase} failed: {failure.message}"
            return CheckResult(SETUP, Status.FAIL, detail[:400], seconds)
    took = " and ".join(f"{r.timings.get('setup_s', 0.0):.1f}s" for r in rollouts)
    took += f" (limit {config.setup_timeout:g}s)"
    first, second = (r.metadata.get("workspace") for r in rollouts)
    if first != second:
        detail = f"item {item.id!r}: two setups returned different metadata"
        return CheckResult(SETUP, Status.FAIL, detail, seconds)
    listings = [a.listing for a in agents]
    if None in listings:
        detail = f"{took}, same metadata; files not compared (find/cksum failed in the slot)"
        return CheckResult(SETUP, Status.PASS, detail, seconds)
    if listings[0] != listings[1]:
        return CheckResult(
            SETUP, Status.FAIL, f"item {item.id!r}: two setups left different files", seconds
        )
    return CheckResult(SETUP, Status.PASS, f"{took}, same metadata and files", seconds)
