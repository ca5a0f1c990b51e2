"""``python apps/trl_env/grpo.py ...``: GRPO steps of TRL's ``GRPOTrainer`` on CPU with any
environment of ours through ``environment_factory`` (docs/trl.md). Writes ``log.json`` (TRL's
log history, every episode's outcome, our tools' results, and each completion as TRL trained on
it) into ``--output-dir``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from hermes_protocols import HermesError
from hermes_rollouts import (
    STOP_SIGNALS,
    blocking_episodes,
    demonstration_path,
    interrupted_exit_code,
)
from hermes_rollouts import option_defaults as defaults
from hermes_rollouts import spec as specs

from hermes_trl_env.completions import trained_completions
from hermes_trl_env.dataset import episode_rows
from hermes_trl_env.environment import EpisodeLedger, environment_factory
from hermes_trl_env.tokenizer import with_tool_template


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo.py", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="a Hugging Face model directory")
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument(
        "--environment", default=defaults.ENVIRONMENT.value, help=defaults.ENVIRONMENT.help
    )
    p.add_argument("--options", type=json.loads, default={}, help="the environment's config (JSON)")
    p.add_argument("--demonstration", help="a shipped demonstration shown before the task")
    p.add_argument("--system-prompt", help="replaces the environment's system prompt")
    p.add_argument("--toolsets", default="", help="comma-separated (default: the environment's)")
    p.add_argument("--sandbox", default=defaults.SANDBOX.value, help=defaults.SANDBOX.help)
    p.add_argument("--command-timeout", type=float, default=defaults.COMMAND_TIMEOUT.value)
    p.add_argument("--prompts", type=int, default=2, help="items per step")
    p.add_argument("--generations", type=int, default=2, help="completions per item")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--max-completion-length", type=int, default=64)
    p.add_argument("--max-tool-calls", type=int, default=2, help="tool-calling iterations")
    p.add_argument("--learning-rate", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    return p


def rollout_spec(args: argparse.Namespace) -> specs.RolloutSpec:
    """Our side of the run: the environment, its sandbox, its tools (no model: TRL samples)."""
    prefill = str(demonstration_path(args.demonstration)) if args.demonstration else None
    toolsets = [name.strip() for name in args.toolsets.split(",") if name.strip()]
    return specs.RolloutSpec(
        sandbox=specs.SandboxSpec(kind=args.sandbox),
        pool=specs.PoolSpec(name="hermes-trl"),
        environment=specs.EnvironmentSpec(
            name=args.environment,
            options=args.options,
            system_prompt=args.system_prompt,
            prefill_messages=prefill,
        ),
        toolsets=specs.ToolsetSpec(
            enabled=toolsets or None, command_timeout_s=args.command_timeout
        ),
        budgets=specs.AgentBudgets(max_attempts=1),
    )


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run ``args.steps`` GRPO steps; the log history and the episodes' outcomes."""
    # TRL's venv (.ci/trl.sh) has these, the workspace mypy checks does not
    from datasets import Dataset  # type: ignore[import-untyped]
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer  # type: ignore[import-not-found]

    ledger = EpisodeLedger()
    with blocking_episodes(rollout_spec(args)) as episodes:
        rows = episode_rows(episodes, count=args.prompts * args.steps, seed=args.seed)
        tokenizer = with_tool_template(AutoTokenizer.from_pretrained(args.model))
        model = AutoModelForCausalLM.from_pretrained(args.model)
        config = GRPOConfig(
            output_dir=str(args.output_dir),
            use_cpu=True,
            bf16=False,
            max_steps=args.steps,
            per_device_train_batch_size=args.prompts * args.generations,
            num_generations=args.generations,
            max_completion_length=args.max_completion_length,
            max_tool_calling_iterations=args.max_tool_calls,
            learning_rate=args.learning_rate,
            beta=0.0,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            seed=args.seed,
            shuffle_dataset=False,
        )
        completions: list[dict[str, list[int]]] = []

        class RecordingTrainer(GRPOTrainer):  # type: ignore[misc]
            """Keeps each generation batch's completions as TRL trains on them."""

            def _generate_and_score_completions(self, inputs: Any) -> Any:
                batch = super()._generate_and_score_completions(inputs)
                completions.extend(trained_completions(batch))
                return batch

        trainer = RecordingTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=Dataset.from_list(rows),
            environment_factory=environment_factory(episodes, ledger, seed=args.seed),
        )
        trainer.train()
        history = list(trainer.state.log_history)
    return {
        "log_history": history,
        "episodes": [
            {"reward": o.reward, "infrastructure": o.infrastructure, "turns": o.turns}
            for o in ledger.outcomes
        ],
        "tool_results": ledger.tool_results,
        "completions": completions,
    }


def interrupt_on_signals() -> list[int]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main thread, wherever TRL is, so
    the episodes' ``with`` block aborts the open episodes and closes the pool; signals during
    that cleanup are only recorded. The signals received, in order."""
    received: list[int] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:
            raise KeyboardInterrupt

    for signum in STOP_SIGNALS:
        signal.signal(signum, interrupt)
    return received


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    received = interrupt_on_signals()
    try:
        log = train(args)
    except HermesError as exc:
        print(f"grpo.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        signum = received[0] if received else signal.SIGINT
        print(
            f"grpo.py: stopped by {signal.Signals(signum).name}: nothing written", file=sys.stderr
        )
        return interrupted_exit_code(signum)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "log.json").write_text(json.dumps(log, indent=1))
    step = next(entry for entry in log["log_history"] if "loss" in entry)
    failures = sum(1 for e in log["episodes"] if e["infrastructure"] is not None)
    # TRL logs the mean reward of a step with no scored episode as None
    reward = "none (no episode scored)" if step["reward"] is None else f"{step['reward']:.3f}"
    print(
        f"grpo.py: {len(log['episodes'])} episodes ({failures} infrastructure failures), "
        f"loss {step['loss']:.4f}, reward {reward}; {args.output_dir / 'log.json'}"
    )
    return 0
