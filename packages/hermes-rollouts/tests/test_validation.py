"""Every problem of a spec at once, in the caller's option names."""

from __future__ import annotations

from hermes_loop import ModelSpec
from hermes_rollouts import (
    AgentBudgets,
    EnvironmentSpec,
    PoolSpec,
    RolloutSpec,
    ToolsetSpec,
    default_prefill,
    default_toolsets,
    spec_problems,
)
from hermes_sandbox.factory import SandboxSpec

NAMES = {"environment.name": "--env", "model.tokenizer": "--tok", "pool.max_hosts": "--hosts"}


def test_defaults_are_a_usable_spec() -> None:
    assert spec_problems(RolloutSpec()) == []


def test_every_problem_at_once_with_the_callers_names() -> None:
    spec = RolloutSpec(
        model=ModelSpec(server_type="sglang", base_url="http://127.0.0.1:1"),
        sandbox=SandboxSpec(kind="remote"),
        pool=PoolSpec(max_hosts=0),
        environment=EnvironmentSpec(name="nope"),
        toolsets=ToolsetSpec(enabled=("terminal",), distribution="dev"),
        budgets=AgentBudgets(max_turns=0),
        parser="nope",
    )
    problems = spec_problems(spec, NAMES)
    text = "\n".join(problems)
    for expected in (
        "set --env to one of endless_terminals",
        "unknown tool-call parser 'nope': set parser",
        "toolsets.enabled and toolsets.distribution are mutually exclusive",
        "budgets.max_turns is 0",
        "needs --tok",
        "sandbox.kind remote needs sandbox.urls",
        "--hosts must be 1 or more",
    ):
        assert expected in text, text
    assert len(problems) == 8


def test_embedded_defaults_pick_terminal_and_the_demonstration() -> None:
    enabled = default_toolsets(None, embedded=True, distribution=None, dataset=False)
    assert enabled == ("terminal",)
    assert default_toolsets(None, embedded=False, distribution=None, dataset=False) is None
    assert default_toolsets(None, embedded=True, distribution=None, dataset=True) is None
    prefill = default_prefill(None, embedded=True, enabled=enabled, dataset=False)
    assert prefill is not None
    assert prefill.endswith(".json")
    assert default_prefill("none", embedded=True, enabled=enabled, dataset=False) is None
    assert default_prefill(None, embedded=False, enabled=enabled, dataset=False) is None
