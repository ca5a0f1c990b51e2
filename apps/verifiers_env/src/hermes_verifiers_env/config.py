"""The configs verifiers parses from its command line (``--env.taskset.*`` and
``--env.agent.harness.*``) and the task record each rollout carries."""

from __future__ import annotations

from typing import Any

from hermes_rollouts import BackendKind
from hermes_rollouts import option_defaults as defaults
from pydantic import Field, field_validator

from hermes_verifiers_env.verifiers_import import vf

#: the taskset id (and package name) verifiers resolves: ``vf-eval hermes-verifiers-env``
TASKSET_ID = "hermes-verifiers-env"


class HermesTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """Which environment of ours (any reference the resolver takes: a shipped or installed
    name, ``pkg.mod:Attr``, ``path/to/file.py:Attr``), its options, and which items."""

    environment: str = Field(defaults.ENVIRONMENT.value, description=defaults.ENVIRONMENT.help)
    options: dict[str, Any] = Field(default_factory=dict)
    seed: int = Field(defaults.SEED.value, description=defaults.SEED.help)
    split: str = "train"


class HermesHarnessConfig(vf.HarnessConfig):  # type: ignore[misc]
    """How one rollout runs: the sandbox backend, the agent's budgets, the tool-call parser and
    what the model is shown before the task (a shipped demonstration or a prefill file)."""

    sandbox: BackendKind = Field(defaults.SANDBOX.value, description=defaults.SANDBOX.help)
    pool_name: str = "hermes-vf"
    max_turns: int = Field(defaults.MAX_TURNS.value, ge=1, description=defaults.MAX_TURNS.help)
    max_tokens: int = Field(defaults.MAX_TOKENS.value, ge=1, description=defaults.MAX_TOKENS.help)
    context_tokens: int = Field(
        defaults.CONTEXT_TOKENS.value, ge=16, description=defaults.CONTEXT_TOKENS.help
    )
    parser: str = Field(defaults.PARSER.value, description=defaults.PARSER.help)
    parse_content_tool_calls: bool = True
    toolsets: list[str] = Field(default_factory=list)  # empty: the environment's own
    demonstration: str | None = None
    prefill_messages: str | None = None
    system_prompt: str | None = None
    command_timeout: float = Field(
        defaults.COMMAND_TIMEOUT.value, gt=0, description=defaults.COMMAND_TIMEOUT.help
    )
    max_attempts: int = Field(3, ge=1)

    @field_validator("toolsets", mode="before")
    @classmethod
    def split_toolsets(cls, value: object) -> object:
        """verifiers' CLI hands a harness option over as the one string after its flag (it
        types only the taskset's options): ``--env.agent.harness.toolsets terminal,file``."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value


class HermesTaskData(vf.TaskData):  # type: ignore[misc]
    """One item of one environment: everything a harness needs to run it anywhere."""

    environment: str
    options: dict[str, Any] = Field(default_factory=dict)
    item: dict[str, Any]
