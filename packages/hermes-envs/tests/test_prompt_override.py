"""SystemPromptOverride: only the system message changes; everything else is the inner env's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import pytest
from hermes_envs import SystemPromptOverride, default_registry, with_system_prompt
from hermes_protocols import (
    AgentResult,
    Environment,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
    StopReason,
)
from hermes_protocols.strategies import messages
from hypothesis import given
from hypothesis import strategies as st


@attrs.define
class ScriptedEnv:
    """An environment whose prompt is fixed and which records what it was asked."""

    conversation: list[Message]
    calls: list[str] = attrs.field(factory=list)
    name: str = "scripted"
    toolsets: Sequence[str] = ("terminal",)

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        self.calls.append(f"items:{seed}:{split}")
        return iter([Item(id=f"{split}-{seed}", split=split)])

    def prompt(self, item: Item) -> Sequence[Message]:
        return list(self.conversation)

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        self.calls.append(f"setup:{item.id}")
        return {"workspace": "w"}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        self.calls.append(f"verify:{item.id}")
        return Score(reward=0.5)


@given(conversation=st.lists(messages, max_size=6), prompt=st.text(min_size=1))
def test_only_the_system_messages_are_replaced(conversation: list[Message], prompt: str) -> None:
    inner = ScriptedEnv(conversation)
    new = list(SystemPromptOverride(inner, prompt).prompt(Item(id="x")))
    assert new[0] == Message.system(prompt)
    assert new[1:] == [m for m in conversation if m.role != "system"]
    assert all(m.role != "system" for m in new[1:])


@pytest.mark.anyio
async def test_everything_else_is_delegated() -> None:
    inner = ScriptedEnv([Message.user("hi")])
    wrapped: Environment = SystemPromptOverride(inner, "Be brief.")
    assert (wrapped.name, tuple(wrapped.toolsets)) == ("scripted", ("terminal",))
    (item,) = list(wrapped.items(seed=3, split="eval"))
    assert await wrapped.setup_workspace(item, slot=None) == {"workspace": "w"}  # type: ignore[arg-type]
    result = AgentResult(messages=(), stop_reason=StopReason.FINAL_ANSWER, turns=0)
    assert (await wrapped.verify(item, result, ctx=None)).reward == 0.5  # type: ignore[arg-type]
    assert inner.calls == ["items:3:eval", "setup:eval-3", "verify:eval-3"]


def test_with_system_prompt_wraps_only_when_given() -> None:
    env = default_registry().create("endless_terminals")
    assert with_system_prompt(env, None) is env
    assert with_system_prompt(env, "") is env
    wrapped = with_system_prompt(env, "Be brief.")
    item = next(iter(env.items(seed=0)))
    assert wrapped.prompt(item)[0] == Message.system("Be brief.")
    assert [m for m in env.prompt(item) if m.role != "system"] == list(wrapped.prompt(item))[1:]
