"""The one default of every setting the apps share, with its meaning: each app's option (and
its ``--help``) and each :mod:`hermes_rollouts.spec` section take theirs from here.

A setting a package type owns (the sampling temperature, the context budget, the sandbox
backend) is read from that type's default, so it is written once there.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import attrs
from hermes_loop import ModelSpec
from hermes_protocols import SamplingParams
from hermes_sandbox.factory import SandboxSpec

T = TypeVar("T")


@attrs.frozen
class OptionDefault(Generic[T]):
    """A shared setting: the batch runner's and the trainer's option name, its default, and
    what it means (the apps' help texts say ``meaning (default)``)."""

    option: str
    value: T
    meaning: str

    @property
    def help(self) -> str:
        """The option's help text: its meaning and its default."""
        shown = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        return f"{self.meaning} ({shown})"


ENVIRONMENT = OptionDefault("--env", "endless_terminals", "the environment")
SEED = OptionDefault("--seed", 0, "item generation and sampling seed")
TEMPERATURE = OptionDefault("--temperature", SamplingParams().temperature, "sampling temperature")
MAX_TURNS = OptionDefault("--max-turns", 4, "turns per rollout")
MAX_TOKENS = OptionDefault("--max-tokens", 160, "tokens per turn")
CONTEXT_TOKENS = OptionDefault(
    "--context-tokens", ModelSpec().context_tokens, "context budget per rollout"
)
ROLLOUT_TIMEOUT = OptionDefault("--rollout-timeout", 600.0, "seconds per rollout")
COMMAND_TIMEOUT = OptionDefault("--command-timeout", 120.0, "seconds per terminal command")
PARSER = OptionDefault("--parser", "hermes", "tool-call parser")
SANDBOX = OptionDefault("--sandbox", SandboxSpec().kind, "sandbox backend")
SANDBOX_SLOTS = OptionDefault("--sandbox-slots", 4, "rollout slots per sandbox host")

#: every shared setting, for the apps' tests
OPTION_DEFAULTS: tuple[OptionDefault[Any], ...] = (
    ENVIRONMENT,
    SEED,
    TEMPERATURE,
    MAX_TURNS,
    MAX_TOKENS,
    CONTEXT_TOKENS,
    ROLLOUT_TIMEOUT,
    COMMAND_TIMEOUT,
    PARSER,
    SANDBOX,
    SANDBOX_SLOTS,
)
