"""`uv run --package hermes-trainer apps/trainer [options]`: the command line of a run."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, HermesError
from hermes_rollouts import (
    CommandParser,
    Interruption,
    ListEnvironments,
    interrupted_exit_code,
    json_object_option,
    progress_bar,
    root_error,
    signals_watched,
)
from hermes_rollouts import option_defaults as defaults
from rich.console import Console

from hermes_trainer.compile_cache import default_compile_cache, use_compile_cache
from hermes_trainer.config import (
    ENDLESS,
    SANDBOXES,
    TrainConfig,
    config_record,
    recipe_options,
)
from hermes_trainer.lora import LoraSpec
from hermes_trainer.metrics import Evaluation, StepMetrics
from hermes_trainer.optimizer import LOSS_NORMS, LR_SCHEDULES, OptimizerSpec
from hermes_trainer.preflight import check_run
from hermes_trainer.tinker_spec import DEFAULT_TIMEOUT_S, TinkerSpec

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    config_defaults = TrainConfig(output=Path("."))
    parser = CommandParser(
        prog="apps/trainer",
        description="GRPO (or SFT) on a LoRA adapter (JAX) of the embedded model. By default "
        "it samples groups of --env (endless_terminals) itself, updates, hot-loads the adapter and "
        "repeats; --atropos-url trains on an Atropos environment's groups, --trajectories on "
        "a batch runner's; --tinker-model samples and trains through the Tinker API. "
        f"docs/training.md's measured curve used {recipe_options()}.",
    )
    add = parser.add_argument
    add(
        "--atropos-url",
        help="train on the groups an Atropos environment sends to this run-api (serve it with "
        "--env.lora_adapter pointing at --adapter)",
    )
    add(
        "--trajectories",
        action="append",
        type=Path,
        help="train on a batch runner run directory or trajectories.jsonl (repeatable)",
    )
    add("--epochs", type=int, default=1, help="passes over --trajectories")
    add(
        "--tinker-model",
        help="sample and train through the Tinker API on this base model (a name, or the "
        "model directory of a local server); needs --temperature 1",
    )
    add(
        "--tinker-url",
        help="a Tinker API server (e.g. SkyRL's skyrl-tx; default: Thinking Machines' service, "
        "with $TINKER_API_KEY)",
    )
    add("--tokenizer", help="the Tinker model's HF tokenizer directory (default: --tinker-model)")
    add(
        "--tinker-timeout",
        type=float,
        metavar="S",
        help=f"seconds each Tinker call may take (default {DEFAULT_TIMEOUT_S:g})",
    )
    add("--objective", choices=("grpo", "sft"), default="grpo")
    add("--min-reward", type=float, default=1.0, help="sft: rollouts with reward >= this train")
    add("--adapter", type=Path, help="adapter file (default: OUTPUT/adapter.gguf)")
    add("--output", help="run directory (default: runs/train-<UTC timestamp>)")
    add(
        "--steps",
        type=int,
        default=config_defaults.steps,
        help="at most this many steps (0: only evaluate the starting weights; needs --eval-items)",
    )
    add("--groups-per-step", type=int, default=config_defaults.groups_per_step)
    add("--group-size", type=int, default=config_defaults.group_size)
    add(
        "--env",
        default=config_defaults.env,
        help="the environment: a shipped or installed name (--list-envs), package.module:NAME "
        f"or path/to/file.py:NAME (default {defaults.ENVIRONMENT.value})",
    )
    add(
        "--env-options",
        type=json_object_option,
        default={},
        help="the environment's options (JSON)",
    )
    add("--list-envs", action=ListEnvironments, help="list the available environments and exit")
    add(
        "--families",
        help=f"endless_terminals families (default {','.join(config_defaults.families)})",
    )
    add("--difficulties", help="endless_terminals levels, comma-separated (default 1)")
    add(
        "--temperature",
        type=float,
        default=config_defaults.temperature,
        help=defaults.TEMPERATURE.help,
    )
    add("--max-turns", type=int, default=config_defaults.max_turns, help=defaults.MAX_TURNS.help)
    add("--max-tokens", type=int, default=config_defaults.max_tokens, help=defaults.MAX_TOKENS.help)
    add(
        "--context-tokens",
        type=int,
        default=config_defaults.context_tokens,
        help=defaults.CONTEXT_TOKENS.help,
    )
    add(
        "--rollout-timeout",
        type=float,
        default=config_defaults.rollout_timeout_s,
        metavar="S",
        help=defaults.ROLLOUT_TIMEOUT.help,
    )
    add("--prefill-messages", help="demonstration JSON (default: the write_word one; 'none')")
    add("--model", help="a llama-architecture .gguf (default: SmolLM2-135M-Instruct)")
    add("--threads", type=int, help="llama.cpp threads")
    add("--seed", type=int, default=config_defaults.seed, help=defaults.SEED.help)
    add(
        "--eval-items",
        type=int,
        default=config_defaults.eval_items,
        help="held-out tasks run before and after training (group-size rollouts each)",
    )
    add(
        "--eval-every",
        type=int,
        default=config_defaults.eval_every,
        metavar="N",
        help="also run the --eval-items tasks after every N steps (default: only before and after)",
    )
    add("--sandbox", choices=SANDBOXES, default=config_defaults.sandbox, help=defaults.SANDBOX.help)
    add("--sandbox-image", metavar="IMAGE", help="docker: the sandboxes' image")
    add("--ray-address", metavar="HOST:PORT", help="ray: the Ray cluster (--sandbox ray)")
    add("--ray-python", metavar="PATH", help="ray: the nodes' Python with hermes-sandbox")
    opt = config_defaults.optimizer
    add("--learning-rate", type=float, default=opt.learning_rate)
    add(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        default=opt.lr_schedule,
        help="the learning rate over --steps updates, after the warmup (default constant)",
    )
    add(
        "--warmup-steps",
        type=int,
        default=opt.warmup_steps,
        metavar="N",
        help="ramp the learning rate up linearly over the first N updates (default 0)",
    )
    add(
        "--loss-norm",
        choices=LOSS_NORMS,
        default=opt.loss_norm,
        help="divide the batch's summed token losses by its trainable tokens (token, DAPO), "
        "average each sequence's mean (sequence, GRPO) or divide by sequences x --max-tokens x "
        "--max-turns (constant, Dr. GRPO); default token",
    )
    add(
        "--clip-eps",
        type=float,
        default=opt.clip_eps,
        help=f"the ratio clip's lower side, 1 - EPS (default {opt.clip_eps:g})",
    )
    add(
        "--clip-eps-high",
        type=float,
        help="the ratio clip's upper side, 1 + EPS (default: --clip-eps; DAPO's clip-higher)",
    )
    add(
        "--passes",
        type=int,
        default=opt.passes,
        metavar="N",
        help="optimizer passes over each step's batch (PPO epochs; default 1)",
    )
    add(
        "--minibatches",
        type=int,
        default=opt.minibatches,
        metavar="M",
        help="split each pass over a step's groups into M optimizer steps (default 1)",
    )
    add(
        "--kl-coef",
        type=float,
        default=opt.kl_coef,
        metavar="BETA",
        help="penalise the k3 KL to the base (adapter-free) model per trainable token with "
        "this coefficient (default 0: no term, no extra forward)",
    )
    add("--lora-rank", type=int, default=config_defaults.lora.rank)
    add("--lora-alpha", type=float, default=config_defaults.lora.alpha)
    add(
        "--init-adapter",
        type=Path,
        metavar="ADAPTER.gguf",
        help="start from this LoRA adapter (e.g. another run's adapter.gguf; its rank and "
        "alpha must be --lora-rank's and --lora-alpha's) instead of a new one",
    )
    add(
        "--checkpoint-every",
        type=int,
        default=config_defaults.checkpoint_every,
        metavar="N",
        help="write OUTPUT/checkpoint.npz (LoRA, optimizer state, step) every N steps "
        f"(default {config_defaults.checkpoint_every})",
    )
    add(
        "--resume",
        action="store_true",
        help="continue the run in --output from its checkpoint (the same options; --steps "
        "may grow)",
    )
    add(
        "--log-to",
        default="",
        metavar="tensorboard,wandb",
        help="also log the metrics to TensorBoard (OUTPUT/tensorboard) and/or wandb (offline "
        "into OUTPUT/wandb unless WANDB_API_KEY is set); needs the trainer's logging extra",
    )
    add(
        "--wandb-project",
        default=config_defaults.wandb_project,
        help=f"the wandb run's project (default {config_defaults.wandb_project})",
    )
    add(
        "--keep-activations",
        action="store_true",
        help="keep every layer's activations for the backward pass instead of recomputing "
        "them: about 3.4x the update's memory, for an update up to 1.4x faster",
    )
    add(
        "--overlap",
        action="store_true",
        help="sample step N+1 while step N's update runs, with the weights before that update "
        "(policy lag 1; the live source and the local learner)",
    )
    add(
        "--jax-cache",
        metavar="DIR",
        help="keep the learner's compiled programs here for later runs (default "
        "~/.cache/hermes-rl/jax-<JAX version>-<CPU>; 'none': compile them every run)",
    )
    add("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    if args.resume and not args.output:
        raise ValueError("--resume needs --output DIR: the run directory to continue")
    output = args.output or f"runs/train-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    config = TrainConfig(
        output=Path(output),
        steps=args.steps,
        groups_per_step=args.groups_per_step,
        group_size=args.group_size,
        env=args.env,
        env_options=args.env_options,
        **_endless(args),
        temperature=args.temperature,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        context_tokens=args.context_tokens,
        rollout_timeout_s=args.rollout_timeout,
        model=args.model,
        threads=args.threads,
        seed=args.seed,
        eval_items=args.eval_items,
        eval_every=args.eval_every,
        lora=LoraSpec(rank=args.lora_rank, alpha=args.lora_alpha),
        optimizer=OptimizerSpec(
            learning_rate=args.learning_rate,
            lr_schedule=args.lr_schedule,
            warmup_steps=args.warmup_steps,
            loss_norm=args.loss_norm,
            clip_eps=args.clip_eps,
            clip_eps_high=args.clip_eps_high,
            passes=args.passes,
            minibatches=args.minibatches,
            kl_coef=args.kl_coef,
        ),
        objective=args.objective,
        min_reward=args.min_reward,
        atropos_url=args.atropos_url,
        trajectories=tuple(args.trajectories or ()),
        epochs=args.epochs,
        adapter=args.adapter,
        init_adapter=args.init_adapter,
        tinker=_tinker(args),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        sandbox=args.sandbox,
        sandbox_image=args.sandbox_image,
        ray_address=args.ray_address,
        ray_python=args.ray_python,
        log_to=tuple(name for name in args.log_to.split(",") if name),
        wandb_project=args.wandb_project,
        keep_activations=args.keep_activations,
        overlap=args.overlap,
    )
    if args.prefill_messages is None:
        return config
    prefill = None if args.prefill_messages == "none" else args.prefill_messages
    return attrs.evolve(config, prefill_messages=prefill)


def _endless(args: argparse.Namespace) -> dict[str, Any]:
    """``--families``/``--difficulties`` (endless_terminals only)."""
    given = {"families": args.families, "difficulties": args.difficulties}
    chosen = {k: v for k, v in given.items() if v is not None}
    if chosen and args.env != ENDLESS:
        raise ValueError(
            f"--families and --difficulties choose {ENDLESS} tasks; pass --env-options for "
            f"{args.env}"
        )
    out: dict[str, Any] = {}
    if args.families is not None:
        out["families"] = tuple(f for f in args.families.split(",") if f)
    if args.difficulties is not None:
        out["difficulties"] = tuple(int(d) for d in args.difficulties.split(",") if d)
    return out


def _tinker(args: argparse.Namespace) -> TinkerSpec | None:
    if args.tinker_model is None:
        if args.tinker_url or args.tokenizer or args.tinker_timeout is not None:
            raise ValueError("--tinker-url, --tokenizer and --tinker-timeout need --tinker-model")
        return None
    return TinkerSpec(
        base_model=args.tinker_model,
        url=args.tinker_url,
        tokenizer=args.tokenizer,
        timeout_s=DEFAULT_TIMEOUT_S if args.tinker_timeout is None else args.tinker_timeout,
    )


def _describe(m: StepMetrics) -> str:
    ratio = "-" if m.log_ratio_mean is None else f"{m.log_ratio_mean:.3f}/{m.log_ratio_max:.2f}"
    lag = "" if m.policy_lag is None else f" · policy lag {m.policy_lag:.1f}"
    return (
        f"step {m.step}: reward {m.mean_reward:.3f} · |log ratio| mean/max {ratio} · "
        f"dropped {m.dropped_groups}/{m.trained_groups + m.dropped_groups} groups{lag}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    console = Console(stderr=True, soft_wrap=True)
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = config_from_args(args)
        check_run(config)
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        return EXIT_CONFIG
    (config.output / "run.json").write_text(json.dumps(config_record(config), indent=2) + "\n")
    console.print(f"training run -> {config.output}", highlight=False)
    if args.jax_cache != "none":
        cache = Path(args.jax_cache) if args.jax_cache else default_compile_cache()
        try:
            use_compile_cache(cache)
        except OSError as exc:
            note = f"--jax-cache {cache}: {exc.strerror or exc}; compiling without a cache"
            console.print(f"[yellow]note:[/] {note}", highlight=False)
    progress = progress_bar("steps", console=console, enabled=args.progress)
    task = progress.add_task("train", total=config.steps, detail="sampling step 1")

    def on_step(metrics: StepMetrics) -> None:
        progress.update(task, completed=metrics.step, detail=_describe(metrics))
        if not args.progress:
            console.print(_describe(metrics), highlight=False)

    def on_eval_progress(label: str, done: int, total: int) -> None:
        detail = f"held-out tasks ({label} weights): {done}/{total}"
        progress.update(task, detail=detail)
        if not args.progress:
            console.print(detail, highlight=False)

    def on_eval(evaluation: Evaluation) -> None:
        console.print(
            f"held-out ({evaluation.label}, after step {evaluation.after_step}): mean reward "
            f"{evaluation.mean_reward:.3f} over {evaluation.rollouts} rollouts",
            highlight=False,
        )
        progress.update(task, detail=f"sampling step {evaluation.after_step + 1}")

    interruption = Interruption()

    def on_drain(signum: int) -> None:
        console.print(
            "[yellow]stopping: finishing the current step (press Ctrl-C again to cancel it)[/]"
        )

    def on_cancel(signum: int) -> None:
        console.print("[yellow]cancelling the current step[/]")

    async def run() -> list[StepMetrics]:
        """The training under the signal policy, release of the model and sandboxes included."""
        from hermes_trainer.loop import train  # JAX and the rest: only once the options hold

        async with signals_watched(interruption, on_drain=on_drain, on_cancel=on_cancel):
            return await train(
                config,
                on_step=on_step,
                on_eval=on_eval,
                on_eval_progress=on_eval_progress,
                interruption=interruption,
            )

    try:
        with progress:
            history = anyio.run(run)
    except KeyboardInterrupt:  # Ctrl-C before the signal policy was installed
        console.print("[yellow]interrupted before the first step[/]")
        return interrupted_exit_code(signal.SIGINT)
    except Exception as exc:
        error = root_error(exc)
        if isinstance(error, ConfigError):
            console.print(f"[red]error:[/] {error}", highlight=False)
            return EXIT_CONFIG
        if not isinstance(error, HermesError | OSError):
            raise
        console.print(f"[red]error:[/] {type(error).__name__}: {error}", highlight=False)
        return EXIT_FAILED
    if len(history) < config.steps and interruption.signum is None:
        console.print(f"the source ran out after {len(history)} steps", highlight=False)
    saved = [m.weights for m in history if m.weights is not None]
    kind, name = ("metrics", "metrics.jsonl") if config.steps else ("evaluation", "eval.jsonl")
    console.print(
        f"{kind}: {config.output / name}, plot: {config.output / 'reward.png'}, "
        f"weights: {saved[-1] if saved else 'none (no step updated)'}",
        highlight=False,
    )
    if interruption.signum is not None:
        console.print(
            f"[yellow]stopped by {signal.Signals(interruption.signum).name} after "
            f"{len(history)} of {config.steps} steps; model and sandboxes released.[/] "
            "Continue it: the same command with --resume --output "
            f"{config.output}",
            highlight=False,
        )
        return interruption.exit_code or EXIT_OK
    return EXIT_OK
