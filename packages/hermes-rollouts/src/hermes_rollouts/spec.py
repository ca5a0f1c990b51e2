"""The one typed description of what a rollout needs: model, sandbox and pool, environment,
toolsets, prefill, agent budgets, parser and sampling.

Apps build a :class:`RolloutSpec` from their own options and check it with
:func:`hermes_rollouts.spec_problems` (every problem at once, in the app's option names)
before :func:`hermes_rollouts.open_session` starts anything. Where a package grows a new
setting (a model's batch size, a token server's logprob mode), it is a field of the section it
belongs to (:class:`hermes_loop.ModelSpec`, :class:`hermes_sandbox.factory.SandboxSpec`) and
each app maps its option onto it in its one ``*_spec`` function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from hermes_loop import ModelSpec
from hermes_sandbox.factory import SandboxSpec

from hermes_rollouts.option_defaults import (
    COMMAND_TIMEOUT,
    ENVIRONMENT,
    MAX_TOKENS,
    MAX_TURNS,
    PARSER,
    SANDBOX_SLOTS,
    TEMPERATURE,
)

#: the spec and its sections (two of them owned by the packages that read them)
__all__ = [
    "AgentBudgets",
    "EnvironmentSpec",
    "ModelSpec",
    "PoolSpec",
    "RolloutSpec",
    "SamplingSpec",
    "SandboxSpec",
    "ToolsetSpec",
]


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _optional_strs(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    return dict(values)


@attrs.frozen(kw_only=True)
class EnvironmentSpec:
    """Where items come from and what the model is shown before the task.

    ``name``/``options``: a registered hermes-envs environment and its config; ``dataset``: a
    hermes-agent batch JSONL file instead (its items use ``dataset_toolsets``; invalid lines
    fail unless ``skip_bad_lines``). ``system_prompt`` replaces the environment's own;
    ``prefill_messages`` is a JSON file of few-shot messages put before every task.
    """

    name: str = ENVIRONMENT.value
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    dataset: str | None = None
    skip_bad_lines: bool = False
    dataset_toolsets: tuple[str, ...] = attrs.field(default=("terminal", "file"), converter=_strs)
    system_prompt: str | None = None
    prefill_messages: str | None = None

    @property
    def source(self) -> str:
        """``dataset:<file>`` or ``env:<name>``."""
        return f"dataset:{self.dataset}" if self.dataset else f"env:{self.name}"


@attrs.frozen(kw_only=True)
class ToolsetSpec:
    """hermes-agent's toolset selection (``enabled`` XOR ``distribution``; ``disabled`` is
    removed last; neither: the environment's own) and the terminal's command timeouts."""

    enabled: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_strs)
    disabled: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    distribution: str | None = None
    command_timeout_s: float = COMMAND_TIMEOUT.value
    max_command_timeout_s: float = 600.0


@attrs.frozen(kw_only=True)
class PoolSpec:
    """The sandbox pool: its name (a restarted run sweeps the hosts of its own name), size and
    timeouts (seconds)."""

    name: str = "hermes"
    slots_per_host: int = SANDBOX_SLOTS.value
    min_hosts: int = 0
    max_hosts: int = 1
    idle_timeout_s: float = 300.0
    acquire_timeout_s: float = 120.0

    @property
    def capacity(self) -> int:
        """Slots at most: rollouts that can run at once."""
        return self.slots_per_host * self.max_hosts


@attrs.frozen(kw_only=True)
class AgentBudgets:
    """Limits of one rollout: turns, tokens per turn (the context budget is
    ``ModelSpec.context_tokens``), the loop's own rollout and generation timeouts, the runner's
    agent-phase timeout, the margin a tool call gets over the command timeout, and how often
    an infrastructure failure is retried in a fresh slot."""

    max_turns: int = MAX_TURNS.value
    max_tokens_per_turn: int = MAX_TOKENS.value
    rollout_timeout_s: float | None = None
    generation_timeout_s: float | None = None
    agent_phase_timeout_s: float = 3600.0
    tool_timeout_margin_s: float = 15.0
    max_attempts: int = 3


@attrs.frozen(kw_only=True)
class SamplingSpec:
    """Sampling of every turn; each rollout's seed is given when it is run."""

    temperature: float = TEMPERATURE.value


@attrs.frozen(kw_only=True)
class RolloutSpec:
    """Everything :func:`hermes_rollouts.open_session` needs."""

    model: ModelSpec = attrs.field(factory=ModelSpec)
    sandbox: SandboxSpec = attrs.field(factory=SandboxSpec)
    pool: PoolSpec = attrs.field(factory=PoolSpec)
    environment: EnvironmentSpec = attrs.field(factory=EnvironmentSpec)
    toolsets: ToolsetSpec = attrs.field(factory=ToolsetSpec)
    budgets: AgentBudgets = attrs.field(factory=AgentBudgets)
    sampling: SamplingSpec = attrs.field(factory=SamplingSpec)
    parser: str = PARSER.value

    @property
    def embedded(self) -> bool:
        """Whether the model runs in-process."""
        return self.model.server_type == "embedded"
