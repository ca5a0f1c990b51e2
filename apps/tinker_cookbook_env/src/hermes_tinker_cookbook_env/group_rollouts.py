"""``group_rollouts``: group rollouts of any environment of ours through tinker-cookbook's own
``do_group_rollout``, sampled by our embedded model; one JSON line per trajectory: tinker's
observation and action tokens, action logprobs and total reward, next to our rollout's token
ledger (ids, mask, logprobs) and our verifier's reward."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import anyio
from hermes_protocols import HermesError, ScoredRollout
from hermes_rollouts import (
    CommandParser,
    Interruption,
    ListEnvironments,
    cancel_when_set,
    demonstration_path,
    interrupted_exit_code,
    item_json,
    json_object_option,
    open_driven_session,
    root_error,
    signals_watched,
)
from hermes_rollouts import option_defaults as defaults
from hermes_rollouts import spec as specs

from hermes_tinker_cookbook_env.completer import HermesTokenCompleter
from hermes_tinker_cookbook_env.cookbook_import import do_group_rollout
from hermes_tinker_cookbook_env.env import HermesEnvGroupBuilder


def parser() -> CommandParser:
    cli = CommandParser(prog="group_rollouts", description=__doc__)
    cli.add_argument(
        "--env", default=defaults.ENVIRONMENT.value, help="the environment (see --list-envs)"
    )
    cli.add_argument("--env-options", type=json_object_option, default={}, help="JSON object")
    cli.add_argument("--list-envs", action=ListEnvironments, help="list environments and exit")
    cli.add_argument("--groups", type=int, default=1, help="how many items (one group each)")
    cli.add_argument("--group-size", type=int, default=2, help="rollouts per item")
    cli.add_argument("--max-tokens", type=int, default=defaults.MAX_TOKENS.value, help="per turn")
    cli.add_argument("--max-turns", type=int, default=defaults.MAX_TURNS.value)
    cli.add_argument("--context-tokens", type=int, default=defaults.CONTEXT_TOKENS.value)
    cli.add_argument("--temperature", type=float, default=defaults.TEMPERATURE.value)
    cli.add_argument("--seed", type=int, default=defaults.SEED.value)
    cli.add_argument("--sandbox", default=defaults.SANDBOX.value, help="sandbox backend kind")
    cli.add_argument("--parser", default=defaults.PARSER.value, help="tool-call parser")
    cli.add_argument("--toolsets", default="", help="comma-separated (default: the env's)")
    cli.add_argument("--demonstration", default=None, help="a shipped demonstration prefill")
    cli.add_argument("--gguf", default=None, help="model GGUF (default: the shipped SmolLM2)")
    cli.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    return cli


def spec_of(args: argparse.Namespace) -> specs.RolloutSpec:
    return specs.RolloutSpec(
        model=specs.ModelSpec(
            server_type="embedded",
            gguf_path=args.gguf,
            context_tokens=args.context_tokens,
            concurrency=args.group_size,
        ),
        sandbox=specs.SandboxSpec(kind=args.sandbox),
        pool=specs.PoolSpec(name="hermes-tinker-cookbook", slots_per_host=args.group_size),
        environment=specs.EnvironmentSpec(
            name=args.env,
            options=args.env_options,
            prefill_messages=None
            if args.demonstration is None
            else str(demonstration_path(args.demonstration)),
        ),
        toolsets=specs.ToolsetSpec(enabled=tuple(t for t in args.toolsets.split(",") if t) or None),
        budgets=specs.AgentBudgets(max_turns=args.max_turns, max_tokens_per_turn=args.max_tokens),
        sampling=specs.SamplingSpec(temperature=args.temperature),
        parser=args.parser,
    )


def terminal_commands(rollout: ScoredRollout) -> list[str]:
    """The terminal commands our loop ran for the model, in order (to replay them)."""
    result = rollout.result
    found: list[str] = []
    for message in result.messages if result is not None else ():
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments)
            except json.JSONDecodeError:
                continue
            if call.name == "terminal" and isinstance(arguments, dict) and "command" in arguments:
                found.append(str(arguments["command"]))
    return found


def trajectory_record(trajectory: Any, total: float, rollout: ScoredRollout) -> dict[str, Any]:
    """tinker's view of one trajectory next to our ledger's."""
    result = rollout.result
    trace = result.trace if result is not None else None
    score = rollout.score
    return {
        "rollout_id": rollout.id,
        "item": item_json(rollout.item),
        "group_index": rollout.group_index,
        "transitions": [
            {
                "ob": t.ob.to_ints(),
                "ac": list(t.ac.tokens),
                "logprobs": list(t.ac.maybe_logprobs or []),
                "stop_reason": t.ac.stop_reason,
            }
            for t in trajectory.transitions
        ],
        "total_reward": total,
        "verifier_reward": score.reward if score is not None else None,
        "turns": result.turns if result is not None else 0,
        "commands": terminal_commands(rollout),
        "ledger": None
        if trace is None
        else {"ids": list(trace.ids), "mask": list(trace.mask), "logprobs": list(trace.logprobs)},
    }


async def _rollouts(args: argparse.Namespace) -> list[str]:
    """Each group's trajectories, one JSON line each."""
    spec = spec_of(args)
    lines: list[str] = []
    async with open_driven_session(spec) as driven:
        completer = HermesTokenCompleter(
            driven.sampler,
            driven.end_token_ids,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
        )
        items = list(islice(driven.session.items(seed=args.seed), args.groups))
        for item in items:
            builder = HermesEnvGroupBuilder(
                driven,
                item,
                group_size=args.group_size,
                seed=args.seed,
                logprobs=completer.take_logprobs,
            )
            group = await do_group_rollout(builder, completer)
            totals = group.get_total_rewards()
            for env, trajectory, total in zip(
                builder.envs, group.trajectories_G, totals, strict=True
            ):
                assert env.episode.rollout is not None  # judged (the group's rewards)
                record = trajectory_record(trajectory, total, env.episode.rollout)
                lines.append(json.dumps(record))
                print(
                    f"{item.id} #{record['group_index']}: reward {total} ({record['turns']} turns)"
                )
    return lines


async def run(args: argparse.Namespace) -> int:
    """The groups' trajectories into ``--out``. The first SIGINT or SIGTERM stops the run: the
    groups in flight are cancelled (the builder's ``cleanup`` releases their slots), nothing
    is written, and the exit code is 128 + the signal, also when the signal came as the last
    group finished."""
    interruption = Interruption()
    async with signals_watched(interruption), anyio.create_task_group() as tg:
        with anyio.CancelScope() as work:
            tg.start_soon(cancel_when_set, interruption.drain, work)
            lines = await _rollouts(args)
        tg.cancel_scope.cancel()
    signum = interruption.signum
    if signum is not None:
        name = signal.Signals(signum).name
        print(f"group_rollouts: stopped by {name}: nothing written", file=sys.stderr)
        return interrupted_exit_code(signum)
    out = anyio.Path(args.out.expanduser())
    await out.parent.mkdir(parents=True, exist_ok=True)
    await out.write_text("".join(f"{line}\n" for line in lines))
    print(f"wrote {len(lines)} trajectories to {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return anyio.run(run, args, backend="asyncio")
    except Exception as exc:
        error = root_error(exc)
        if not isinstance(error, HermesError):
            raise
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
