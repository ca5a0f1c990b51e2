"""Shared fixtures of the batch-runner unit tests: rollouts built from hermes value types."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
import pytest
from hermes_batch_runner.components import Components
from hermes_batch_runner.config import RunConfig
from hermes_protocols import (
    AgentResult,
    Item,
    Message,
    ScoredRollout,
    StopReason,
    TokenTrace,
    ToolCall,
    ToolCallError,
    ToolErrorKind,
    TurnStats,
)
from hermes_protocols.examples import failed_rollout, scored_rollout

MakeRollout = Callable[..., ScoredRollout]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def build_rollout(
    item_id: str = "i0",
    group_index: int = 0,
    *,
    reward: float | None = 1.0,
    reasoning: str | None = "think <b>hard</b>",
    trace: bool = True,
    env: str = "fake",
) -> ScoredRollout:
    """A realistic rollout: a tool call, its result, a final answer; ``reward=None`` fails."""
    item = Item(id=item_id, data={"task": "count files"})
    call = ToolCall(id="call_1", name="terminal", arguments='{"command": "ls | wc -l"}')
    messages = [
        Message.system("You are an agent."),
        Message.user("How many files? <script>alert(1)</script>"),
        Message.assistant(None, (call,), reasoning=reasoning),
        Message.tool("3\n", tool_call_id="call_1", name="terminal"),
        Message.assistant("There are 3 files."),
    ]
    result = AgentResult(
        messages=messages,
        stop_reason=StopReason.FINAL_ANSWER,
        turns=2,
        trace=TokenTrace(ids=(1, 2, 3, 4), mask=(0, 1, 0, 1), logprobs=(0.0, -0.5, 0.0, -0.1))
        if trace
        else None,
        tool_errors=[
            ToolCallError(ToolErrorKind.INVALID_ARGUMENTS, 1, "terminal", "{bad", "not JSON")
        ],
        turn_stats=[
            TurnStats(1, 0.2, 0.05, 10, 5, 1, reasoning=reasoning),
            TurnStats(2, 0.1, 0.0, 20, 6, 0),
        ],
    )
    if reward is None:
        return failed_rollout(
            item, group_index, env=env, phase="acquire", message="no slot", attempts=3
        )
    return scored_rollout(
        item, group_index, result, reward, env=env, metrics={"files": 3.0}, timings={"agent_s": 0.3}
    )


@pytest.fixture
def make_rollout() -> MakeRollout:
    return build_rollout


class FakeComponents:
    """Components whose rollouts are built in-process; ``delay`` simulates inference time."""

    def __init__(
        self,
        n_items: int,
        *,
        delay: float = 0.0,
        fail_items: Sequence[str] = (),
        env_name: str = "fake",
    ) -> None:
        self.env_name = env_name
        self.items = [Item(id=f"item{i}") for i in range(n_items)]
        self.model = "fake-model"
        self.delay = delay
        self.fail_items = set(fail_items)
        self.calls: list[tuple[str, int]] = []

    async def run_one(self, item: Item, item_index: int, group_index: int) -> ScoredRollout:
        self.calls.append((item.id, group_index))
        await anyio.sleep(self.delay)
        reward = None if item.id in self.fail_items else float(item_index % 2)
        return build_rollout(item.id, group_index, reward=reward, env=self.env_name)


class FakeWiring:
    """A :class:`~hermes_batch_runner.components.Wiring` handing out one FakeComponents."""

    def __init__(self, components: FakeComponents) -> None:
        self.components = components
        self.entered = 0
        self.exited = 0

    @asynccontextmanager
    async def __call__(self, config: RunConfig) -> AsyncIterator[Components]:
        self.entered += 1
        try:
            yield self.components
        finally:
            self.exited += 1


@pytest.fixture
def fake_components() -> Callable[..., FakeComponents]:
    return FakeComponents


@pytest.fixture
def fake_wiring() -> Callable[[FakeComponents], FakeWiring]:
    return FakeWiring
