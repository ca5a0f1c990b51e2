"""Every problem of a :class:`RolloutSpec` at once, each naming the caller's option.

``option_names`` maps spec paths (``"model.base_url"``, ``"budgets.max_turns"``,
``"environment.name"``) to the app's option names (``"--model-url"``,
``"--env.max_agent_turns"``); an unmapped path is shown as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import hermes_parsers
from hermes_protocols import ConfigError, Environment

from hermes_rollouts.environment import environment_check
from hermes_rollouts.option_names import OptionNames
from hermes_rollouts.spec import RolloutSpec

#: toolsets the assembly provides (hermes-agent's names)
TOOLSET_NAMES: tuple[str, ...] = ("terminal", "file")
#: server types that need a Hugging Face tokenizer directory (exact tokens over HTTP)
TOKEN_SERVERS: tuple[str, ...] = ("sglang", "vllm", "llama_cpp")


def parser_names() -> tuple[str, ...]:
    """The tool-call parsers hermes-parsers knows."""
    return tuple(hermes_parsers.list_parsers())


@attrs.frozen(slots=True)
class SpecCheck:
    """Every problem of a spec, and its environment (resolved and built once; ``None`` when
    the environment part of the spec has a problem)."""

    problems: tuple[str, ...]
    environment: Environment | None

    def valid_environment(self) -> Environment:
        """The environment of a spec without problems; else one :class:`ConfigError` listing
        every problem."""
        problems = self.problems
        if len(problems) == 1:
            raise ConfigError(problems[0])
        if problems:
            raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
        assert self.environment is not None
        return self.environment


def check_spec(
    spec: RolloutSpec,
    option_names: Mapping[str, str] | None = None,
    *,
    environment: Environment | None = None,
) -> SpecCheck:
    """Every problem of ``spec``, and its environment: ``environment`` when given (already
    built from this spec: not resolved again), else resolved and built here, once."""
    name = OptionNames(option_names)
    if environment is None:
        env_problems, environment = environment_check(spec.environment, name)
    else:
        env_problems = []
    return SpecCheck(
        (
            *env_problems,
            *_parser_problems(spec, name),
            *_toolset_problems(spec, name),
            *_budget_problems(spec, name),
            *_model_problems(spec, name),
            *_sandbox_problems(spec, name),
        ),
        environment,
    )


def spec_problems(spec: RolloutSpec, option_names: Mapping[str, str] | None = None) -> list[str]:
    """Every problem of ``spec``, each phrased as what to change (empty: the spec is usable)."""
    return list(check_spec(spec, option_names).problems)


def validate(
    spec: RolloutSpec,
    option_names: Mapping[str, str] | None = None,
    *,
    environment: Environment | None = None,
) -> Environment:
    """The spec's environment (``environment`` when given); raise one :class:`ConfigError`
    listing every problem of ``spec``."""
    return check_spec(spec, option_names, environment=environment).valid_environment()


def _choices(names: tuple[str, ...]) -> str:
    return ", ".join(sorted(names)) or "(none)"


def _parser_problems(spec: RolloutSpec, name: OptionNames) -> list[str]:
    if spec.model.server_type != "openai" and spec.parser not in parser_names():
        return [
            f"unknown tool-call parser {spec.parser!r}: set {name('parser')} to one of "
            f"{_choices(parser_names())}"
        ]
    return []


def _toolset_problems(spec: RolloutSpec, name: OptionNames) -> list[str]:
    tools = spec.toolsets
    problems: list[str] = []
    if tools.enabled and tools.distribution:
        problems.append(
            f"{name('toolsets.enabled')} and {name('toolsets.distribution')} are mutually "
            "exclusive: set one"
        )
    for path, names in (
        ("toolsets.enabled", tools.enabled or ()),
        ("toolsets.disabled", tools.disabled),
    ):
        unknown = [n for n in names if n not in TOOLSET_NAMES]
        if unknown:
            problems.append(
                f"unknown toolset(s) {', '.join(unknown)} in {name(path)}: use "
                f"{_choices(TOOLSET_NAMES)}"
            )
    if not tools.command_timeout_s > 0:
        problems.append(f"{name('toolsets.command_timeout_s')} must be positive (seconds)")
    return problems


def _budget_problems(spec: RolloutSpec, name: OptionNames) -> list[str]:
    budgets = spec.budgets
    problems: list[str] = []
    for path, value in (
        ("budgets.max_turns", budgets.max_turns),
        ("budgets.max_tokens_per_turn", budgets.max_tokens_per_turn),
        ("model.context_tokens", spec.model.context_tokens),
    ):
        if value < 1:
            problems.append(f"{name(path)} is {value}: use 1 or more")
    if budgets.max_tokens_per_turn >= spec.model.context_tokens:
        problems.append(
            f"{name('budgets.max_tokens_per_turn')} ({budgets.max_tokens_per_turn}) must be "
            f"below {name('model.context_tokens')} ({spec.model.context_tokens}), the "
            "whole-sequence budget"
        )
    for path, timeout in (
        ("budgets.rollout_timeout_s", budgets.rollout_timeout_s),
        ("budgets.generation_timeout_s", budgets.generation_timeout_s),
    ):
        if timeout is not None and not timeout > 0:
            problems.append(f"{name(path)} must be positive (seconds)")
    if spec.sampling.temperature < 0:
        problems.append(f"{name('sampling.temperature')} must be 0 or more")
    return problems


def _model_problems(spec: RolloutSpec, name: OptionNames) -> list[str]:
    model = spec.model
    kind = model.server_type
    server = name("model.server_type")
    problems: list[str] = []
    if kind == "embedded":
        if model.base_url:
            problems.append(
                f"{name('model.base_url')} is set but {server} is embedded: pick the server's "
                "type (openai, sglang, vllm, llama_cpp) or drop the URL"
            )
        return problems
    if not model.base_url:
        problems.append(
            f"{server} {kind} needs {name('model.base_url')} (the server's base URL); leave "
            f"{server} unset to use the embedded model"
        )
    if kind in ("openai", "vllm") and not model.model:
        problems.append(f"{server} {kind} needs {name('model.model')} (the served model's name)")
    if kind in TOKEN_SERVERS and not model.tokenizer:
        problems.append(
            f"{server} {kind} needs {name('model.tokenizer')} (token mode: the served "
            "model's Hugging Face tokenizer directory)"
        )
    return problems


def _sandbox_problems(spec: RolloutSpec, name: OptionNames) -> list[str]:
    box, pool = spec.sandbox, spec.pool
    problems: list[str] = []
    kind = f"{name('sandbox.kind')} {box.kind}"
    if box.kind == "remote":
        if not box.urls:
            problems.append(f"{kind} needs {name('sandbox.urls')} (sandbox server URLs)")
        if not box.token:
            problems.append(f"{kind} needs the servers' bearer token: {name('sandbox.token')}")
    if box.kind == "nomad":
        if not box.nomad_address:
            problems.append(f"{kind} needs {name('sandbox.nomad_address')} (http://host:4646)")
        if not box.image:
            problems.append(
                f"{kind} needs {name('sandbox.image')} (an image with hermes-sandbox and "
                "bubblewrap)"
            )
    if box.kind == "ray" and not box.ray_address:
        problems.append(f"{kind} needs {name('sandbox.ray_address')} (the cluster's host:port)")
    if pool.slots_per_host < 1:
        problems.append(f"{name('pool.slots_per_host')} must be 1 or more")
    if pool.max_hosts < 1:
        problems.append(f"{name('pool.max_hosts')} must be 1 or more")
    if pool.min_hosts > pool.max_hosts:
        problems.append(f"{name('pool.min_hosts')} is above {name('pool.max_hosts')}")
    return problems
