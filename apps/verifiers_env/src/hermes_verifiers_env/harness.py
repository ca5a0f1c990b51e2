"""The harness that runs one of our rollouts in-process, its model calls through verifiers'
interception endpoint (verifiers' contract for an in-process harness) and everything else ours:
a sandbox slot acquired for the rollout, the environment's ``setup_workspace``, the tools bound
to the slot, ``verify`` on the same slot, the slot released on every exit path (cancellation
included), on an event loop of its own (:mod:`hermes_verifiers_env.own_loop`). The verifier's
reward goes onto the trace; an infrastructure failure raises
:class:`verifiers.v1.SandboxError`, so verifiers records an errored rollout, never a 0.0."""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any

from hermes_rollouts import (
    RolloutOutcome,
    demonstration_path,
    derive_seed,
    item_from_json,
    run_single_rollout,
)
from hermes_rollouts import option_defaults as defaults
from hermes_rollouts import spec as specs

from hermes_verifiers_env.config import HermesHarnessConfig
from hermes_verifiers_env.own_loop import run_on_own_loop
from hermes_verifiers_env.verifiers_import import vf


def pool_name(prefix: str, trace_id: str) -> str:
    """A pool name of this rollout alone (a pool sweeps the leftovers of its own name)."""
    return f"{prefix}-{hashlib.sha256(trace_id.encode()).hexdigest()[:12]}"


def rollout_spec(
    config: HermesHarnessConfig,
    data: dict[str, Any],
    *,
    endpoint: str,
    secret: str,
    model: str,
    temperature: float | None,
    trace_id: str,
) -> specs.RolloutSpec:
    """The spec of one rollout: the model behind verifiers' endpoint, our sandbox and tools."""
    prefill = config.prefill_messages
    if config.demonstration is not None:
        prefill = str(demonstration_path(config.demonstration))
    return specs.RolloutSpec(
        model=specs.ModelSpec(
            server_type="openai",
            base_url=endpoint,
            model=model,
            api_key=secret,
            probe=False,
            context_tokens=config.context_tokens,
            parse_content_tool_calls=config.parse_content_tool_calls,
        ),
        sandbox=specs.SandboxSpec(kind=config.sandbox),
        pool=specs.PoolSpec(name=pool_name(config.pool_name, trace_id), slots_per_host=1),
        environment=specs.EnvironmentSpec(
            name=data["environment"],
            options=data["options"],
            system_prompt=config.system_prompt,
            prefill_messages=prefill,
        ),
        toolsets=specs.ToolsetSpec(
            enabled=config.toolsets or None, command_timeout_s=config.command_timeout
        ),
        budgets=specs.AgentBudgets(
            max_turns=config.max_turns,
            max_tokens_per_turn=config.max_tokens,
            max_attempts=config.max_attempts,
        ),
        sampling=specs.SamplingSpec(
            temperature=defaults.TEMPERATURE.value if temperature is None else temperature
        ),
        parser=config.parser,
    )


def record(trace: Any, outcome: RolloutOutcome) -> None:
    """Put a judged rollout's reward and metrics onto verifiers' trace; raise
    :class:`verifiers.v1.SandboxError` for one that could not be judged."""
    if outcome.reward is None:
        raise vf.SandboxError(f"hermes rollout infrastructure failure: {outcome.infrastructure}")
    trace.record_reward("hermes_reward", outcome.reward)
    trace.record_metric("hermes_turns", float(outcome.turns))
    for name, value in outcome.metrics.items():
        trace.record_metric(f"hermes_{name}", float(value))


class HermesHarness(vf.Harness[HermesHarnessConfig]):  # type: ignore[misc]
    """Runs a :class:`~hermes_verifiers_env.config.HermesTaskData` task (see the module doc)."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False  # the model's commands run in our sandbox, not in verifiers' runtime
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
    ) -> Any:
        fields: dict[str, Any] = data.model_dump(mode="json")
        spec = rollout_spec(
            self.config,
            fields,
            endpoint=endpoint,
            secret=secret,
            model=ctx.model,
            temperature=ctx.sampling.temperature,
            trace_id=trace.id,
        )
        item = item_from_json(fields["item"])
        seed = derive_seed(0, trace.id)
        rollout = await run_on_own_loop(partial(run_single_rollout, spec, item, seed=seed))
        record(trace, RolloutOutcome.of(rollout))
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
