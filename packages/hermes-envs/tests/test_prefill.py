"""Prefill demonstrations: file checks, placement after the system prompt, record marking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hermes_envs import DatasetError, default_registry
from hermes_envs.prefill import (
    PrefilledEnvironment,
    demonstration_path,
    load_prefill,
    parse_prefill,
    with_prefill,
)
from hermes_protocols import Item, Message, ToolCall
from hermes_protocols.convert import messages_to_openai
from hermes_protocols.strategies import messages
from hypothesis import given
from hypothesis import strategies as st

from .test_prompt_override import ScriptedEnv

DEMO = (
    Message.user("show the files"),
    Message.assistant(None, (ToolCall("d1", "terminal", '{"command": "ls"}'),)),
    Message.tool('{"output": "a.txt\\n", "exit_code": 0, "error": null}', "d1"),
    Message.assistant("Done."),
)


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "prefill.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["terminal", "write_word"])
def test_shipped_demonstration_loads_and_shows_real_tool_calls(name: str) -> None:
    demo = load_prefill(demonstration_path(name))
    calls = [c for m in demo for c in m.tool_calls]
    assert calls
    assert all(c.name == "terminal" for c in calls)
    assert all(json.loads(c.arguments)["command"] for c in calls)
    assert demo[-1].role == "assistant"
    assert demo[-1].content


def test_openai_messages_round_trip(tmp_path: Path) -> None:
    assert load_prefill(write(tmp_path, messages_to_openai(DEMO))) == DEMO


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "non-empty JSON list"),
        ({"role": "user"}, "non-empty JSON list"),
        ([{"role": "system", "content": "x"}], "system prompt comes from the environment"),
        (["hi"], "message 0"),
        ([{"role": "tool", "content": "x", "tool_call_id": "nope"}], "'nope'"),
        ([{"role": "user", "content": 3}], "prefill"),
    ],
)
def test_bad_prefill_names_what_to_fix(tmp_path: Path, data: object, says: str) -> None:
    with pytest.raises(DatasetError, match="prefill") as info:
        load_prefill(write(tmp_path, data))
    assert says in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_unreadable_or_invalid_json_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read prefill file"):
        load_prefill(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(DatasetError, match="is not JSON"):
        load_prefill(broken)


@given(conversation=st.lists(messages, max_size=6))
def test_prefill_goes_after_the_system_messages(conversation: list[Message]) -> None:
    prompt = list(PrefilledEnvironment(ScriptedEnv(conversation), DEMO).prompt(_item()))
    head = 0
    while head < len(conversation) and conversation[head].role == "system":
        head += 1
    assert prompt == [*conversation[:head], *DEMO, *conversation[head:]]


@pytest.mark.anyio
async def test_setup_metadata_counts_the_prefill_messages() -> None:
    env = PrefilledEnvironment(ScriptedEnv([Message.user("task")]), DEMO)
    metadata = await env.setup_workspace(_item(), slot=None)  # type: ignore[arg-type]
    assert metadata == {"workspace": "w", "prefill_messages": len(DEMO)}


def test_with_prefill_wraps_only_when_given() -> None:
    env = default_registry().create("endless_terminals")
    assert with_prefill(env, ()) is env
    assert parse_prefill([{"role": "user", "content": "x"}], where="inline")[0].content == "x"


def _item() -> Item:
    return Item(id="x")
