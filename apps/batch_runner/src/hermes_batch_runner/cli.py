"""Command line of the batch runner: ``uv run apps/batch_runner [options]``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
from hermes_protocols import ConfigError, Environment, HermesError
from hermes_protocols.formats import RunDirectory
from hermes_rollouts import (
    SERVER_TYPES,
    CommandParser,
    Credentials,
    ListEnvironments,
    file_sha256,
    json_object_option,
    load_dataset,
    root_error,
)
from hermes_rollouts import option_defaults as defaults
from rich.console import Console

from hermes_batch_runner.app import EXIT_INTERRUPTED, RunResult, resume_command, run_batch
from hermes_batch_runner.components import Wiring
from hermes_batch_runner.config import (
    SANDBOXES,
    RunConfig,
    config_from_options,
    load_config_file,
    resolve_for_resume,
)
from hermes_batch_runner.errors import OutputDirError
from hermes_batch_runner.run_dir import (
    default_run_dir,
    prepare_run_dir,
    read_json,
)

EXIT_CONFIG = 2
EXIT_FAILED = 1
RUNS_DIR = Path("runs")

DESCRIPTION = """\
Generate trajectories with a tool-using agent in sandboxes, verified and scored, from an
environment (default: endless_terminals; yours as package.module:NAME, path/to/file.py:NAME or
an installed name, see --list-envs) or a hermes-agent batch JSONL dataset.
With no options it runs a few items with the embedded SmolLM2 model on the bwrap sandbox,
offline, into runs/<timestamp>/. Every finished rollout is written durably; a killed run is
continued with --resume.
"""


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="batch_runner",
        description=DESCRIPTION,
        argument_default=argparse.SUPPRESS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_argument_group("what to run")
    src.add_argument(
        "--env",
        metavar="ENV",
        help="environment: a shipped or installed name (--list-envs), package.module:NAME or "
        f"path/to/file.py:NAME (default {defaults.ENVIRONMENT.value})",
    )
    src.add_argument(
        "--list-envs",
        action=ListEnvironments,
        help="list the shipped and installed environments and exit",
    )
    src.add_argument(
        "--env-options",
        type=json_object_option,
        metavar="JSON",
        help='the environment\'s options, e.g. \'{"families": ["write_word"]}\' for '
        "endless_terminals (docs/environments.md)",
    )
    src.add_argument("--dataset", metavar="FILE.jsonl", help="hermes-agent batch JSONL instead")
    src.add_argument(
        "--skip-bad-lines",
        dest="on_bad_line",
        action="store_const",
        const="skip",
        help="skip invalid dataset lines (reported with line numbers) instead of failing",
    )
    src.add_argument("--num-items", type=int, metavar="N", help="items to run (env default 4)")
    src.add_argument("--group-size", type=int, metavar="N", help="rollouts per item (1)")
    src.add_argument("--seed", type=int, help=defaults.SEED.help)
    agent = p.add_argument_group("agent")
    agent.add_argument("--max-turns", type=int, metavar="N", help=defaults.MAX_TURNS.help)
    agent.add_argument("--max-tokens", type=int, metavar="N", help=defaults.MAX_TOKENS.help)
    agent.add_argument("--temperature", type=float, help=defaults.TEMPERATURE.help)
    agent.add_argument("--system-prompt", metavar="TEXT", help="replace the system prompt")
    agent.add_argument(
        "--prefill-messages",
        metavar="FILE",
        help="JSON list of chat messages put before each task (few-shot steering; 'none' "
        "= off; default: a terminal demonstration for the embedded model)",
    )
    agent.add_argument(
        "--toolsets",
        metavar="A,B",
        help="enabled toolsets (env's; terminal with the embedded model)",
    )
    agent.add_argument("--disabled-toolsets", metavar="A,B", help="toolsets to remove")
    agent.add_argument("--distribution", metavar="NAME", help="sample toolsets per group")
    agent.add_argument("--parser", metavar="NAME", help=defaults.PARSER.help)
    agent.add_argument(
        "--rollout-timeout", type=float, metavar="S", help=defaults.ROLLOUT_TIMEOUT.help
    )
    model = p.add_argument_group("model")
    model.add_argument("--server-type", choices=SERVER_TYPES, help="embedded unless --model-url")
    model.add_argument("--model-url", metavar="URL", help="OpenAI-compatible or engine base URL")
    model.add_argument("--model", metavar="NAME|FILE.gguf", help="model name or local GGUF")
    model.add_argument("--tokenizer", metavar="DIR", help="HF tokenizer dir (token servers)")
    model.add_argument("--context-tokens", type=int, metavar="N", help=defaults.CONTEXT_TOKENS.help)
    model.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="fix the embedded model's llama.cpp threads (default: tuned per step, up to the "
        "physical cores)",
    )
    model.add_argument("--api-key", help="server API key (default: $OPENAI_API_KEY)")
    model.add_argument(
        "--extra-body", type=json_object_option, metavar="JSON", help="request extras"
    )
    model.add_argument(
        "--end-token-ids",
        metavar="A,B",
        help="ids ending a turn (token servers; default: from the server / tokenizer)",
    )
    model.add_argument(
        "--server-logprob-mode",
        choices=("sampled", "raw"),
        help="logprobs a vLLM/SGLang server returns (vLLM raw, SGLang sampled)",
    )
    model.add_argument(
        "--parse-tool-calls-from-content",
        dest="parse_content_tool_calls",
        action="store_const",
        const=True,
        help="phase 1: parse tool calls in content with --parser (server ignores tools)",
    )
    box = p.add_argument_group("sandbox")
    box.add_argument("--sandbox", choices=SANDBOXES, help=defaults.SANDBOX.help)
    box.add_argument("--sandbox-slots", type=int, metavar="N", help=defaults.SANDBOX_SLOTS.help)
    box.add_argument("--sandbox-max-hosts", type=int, metavar="N", help="max hosts (1)")
    box.add_argument("--sandbox-image", metavar="IMAGE", help="docker/modal/nomad image")
    box.add_argument(
        "--sandbox-image-alias",
        action="append",
        metavar="NAME=IMAGE",
        help="docker: use local IMAGE for image NAME (tasks' images, FROM lines; repeat)",
    )
    box.add_argument(
        "--sandbox-url", action="append", metavar="URL", help="remote sandbox server (repeat)"
    )
    box.add_argument("--sandbox-token", help="remote server token ($HERMES_SANDBOX_TOKEN)")
    box.add_argument(
        "--sandbox-allow-network", action="store_const", const=True, help="allow network"
    )
    box.add_argument("--nomad-address", metavar="URL", help="Nomad HTTP API address")
    box.add_argument("--ray-address", metavar="HOST:PORT", help="Ray cluster (--sandbox ray)")
    box.add_argument(
        "--ray-python", metavar="PATH", help="the nodes' Python with hermes-sandbox (ray)"
    )
    box.add_argument(
        "--command-timeout", type=float, metavar="S", help=defaults.COMMAND_TIMEOUT.help
    )
    out = p.add_argument_group("output and control")
    out.add_argument("--output", metavar="DIR", help="run directory (runs/<timestamp>)")
    out.add_argument(
        "--resume", action="store_true", help="continue the run in --output (or the latest)"
    )
    out.add_argument(
        "--retry-failed",
        action="store_true",
        help="resume and run again the rollouts that failed for infrastructure reasons, even "
        "when the run is finished (--resume does so for an unfinished run)",
    )
    out.add_argument("--config", metavar="FILE", help="options from YAML/TOML (CLI wins)")
    out.add_argument("--concurrency", type=int, metavar="N", help="rollouts in flight (4)")
    out.add_argument(
        "--require-reasoning", action="store_const", const=True, help="drop no-reasoning rollouts"
    )
    out.add_argument("--min-reward", type=float, metavar="R", help="drop rollouts below R")
    out.add_argument("--drain-timeout", type=float, metavar="S", help="Ctrl-C grace (30)")
    out.add_argument(
        "--no-progress", dest="progress", action="store_const", const=False, help="no bar"
    )
    return p


def latest_run(base: Path) -> Path:
    runs = sorted(
        (d for d in base.glob("*") if RunDirectory(d).run.is_file()), key=lambda d: d.name
    )
    if not runs:
        raise OutputDirError(f"no run to resume under {base}/; pass --output DIR")
    return runs[-1]


@attrs.frozen(slots=True)
class Resolved:
    """What the command line resolved to; ``skipped`` lists dataset lines skipped as invalid."""

    config: RunConfig
    paths: RunDirectory
    resume: bool
    credentials: Credentials
    environment: Environment
    skipped: tuple[str, ...] = ()
    retry_failed: bool = False


def resolve(args: dict[str, Any]) -> Resolved:
    """Turn parsed arguments into the config, the prepared run directory and credentials."""
    credentials = Credentials.from_environ(
        os.environ, api_key=args.pop("api_key", None), sandbox_token=args.pop("sandbox_token", None)
    )
    retry_failed = bool(args.pop("retry_failed", False))
    resume = bool(args.pop("resume", False)) or retry_failed
    explicit: dict[str, Any] = {}
    if "config" in args:
        explicit.update(load_config_file(args.pop("config")))
    explicit.update(args)
    if resume:
        given = explicit.get("output")
        root = Path(given) if given else latest_run(RUNS_DIR)
        run_file = RunDirectory(root).run
        if not run_file.is_file():
            raise OutputDirError(f"cannot resume: {run_file} does not exist")
        recorded = read_json(run_file)
        config = resolve_for_resume(recorded["config"], {**explicit, "output": str(root)})
        sha = recorded.get("dataset_sha256")
        if config.dataset and sha and file_sha256(Path(config.dataset)) != sha:
            raise ConfigError(
                f"--resume refuses: dataset {config.dataset} changed since the run started"
            )
    else:
        config = config_from_options(explicit)
        root = Path(config.output) if config.output else default_run_dir(RUNS_DIR)
        config = attrs.evolve(config, output=str(root))
    environment = check_spec(config, credentials)
    skipped: tuple[str, ...] = ()
    if config.dataset:
        loaded = load_dataset(config.dataset, skip_bad_lines=config.on_bad_line == "skip")
        skipped = tuple(f"line {b.lineno}: {b.reason}" for b in loaded.bad_lines)
    paths = prepare_run_dir(root, resume=resume)
    return Resolved(config, paths, resume, credentials, environment, skipped, retry_failed)


def check_spec(config: RunConfig, credentials: Credentials) -> Environment:
    """Every problem of the options at once (one ConfigError), before anything is created;
    the run's environment (resolved here, once)."""
    from hermes_rollouts import validate

    from hermes_batch_runner.wiring import OPTION_NAMES, rollout_spec

    return validate(rollout_spec(config, credentials), OPTION_NAMES)


def _default_wiring(resolved: Resolved) -> Wiring:
    from hermes_batch_runner.wiring import real_components

    return functools.partial(
        real_components, credentials=resolved.credentials, environment=resolved.environment
    )


def _fmt(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "n/a"


def _counts_text(counts: object) -> str:
    if not isinstance(counts, dict) or not counts:
        return "none"
    return ", ".join(f"{key} {value}" for key, value in counts.items())


def print_summary(console: Console, result: RunResult) -> None:
    counts = result.summary["counts"]
    reward = result.summary["reward"]
    session = result.summary["session"]
    assert isinstance(counts, dict)
    assert isinstance(reward, dict)
    assert isinstance(session, dict)
    tools = result.summary["tool_errors"]
    assert isinstance(tools, dict)
    mean = reward.get("mean")
    console.print(
        f"[bold]{counts['finished']}/{counts['expected']} rollouts[/] "
        f"(kept {counts['kept']}, failed {counts['failed']}, filtered {counts['filtered']}) · "
        f"mean reward {_fmt(mean)} · "
        f"pass rate {_fmt(reward.get('pass_rate'))} · "
        f"tool calls {tools['tool_calls']} ({tools['total']} failed) · "
        f"{session['rollouts']} this session in {session['wall_s']:.1f}s"
    )
    console.print(f"stop reasons: {_counts_text(counts['stop_reasons'])}", highlight=False)
    if counts["failed_by_reason"]:
        console.print(f"failed by reason: {counts['failed_by_reason']}")
    console.print(f"output: {result.paths.root}/ (trajectories.jsonl, summary.json)")
    console.print(f"report: {result.paths.report}", highlight=False)
    if result.interrupted or counts["remaining"]:
        console.print(f"[yellow]interrupted; resume with:[/] {resume_command(result.paths)}")


def main(argv: Sequence[str] | None = None, *, wiring: Wiring | None = None) -> int:
    """Run the command line; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    console = Console(stderr=True, soft_wrap=True)
    try:
        args = vars(build_parser().parse_args(arguments))
        resolved = resolve(args)
    except ConfigError as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        return EXIT_CONFIG
    except (HermesError, OSError) as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        return EXIT_FAILED
    config, paths, resume = resolved.config, resolved.paths, resolved.resume
    for line in resolved.skipped:
        console.print(f"[yellow]skipping invalid dataset {line}[/]", highlight=False)
    chosen = wiring or _default_wiring(resolved)
    console.print(f"batch run: {config.source} -> {paths.root}", highlight=False)
    try:
        result = anyio.run(
            functools.partial(
                run_batch,
                config,
                paths,
                resume=resume,
                wiring=chosen,
                console=console,
                argv=arguments,
                retry_failed=resolved.retry_failed,
            )
        )
    except KeyboardInterrupt:
        _discard_if_unstarted(paths)
        console.print("[yellow]interrupted before any rollout was written[/]")
        return EXIT_INTERRUPTED
    except Exception as exc:
        error = root_error(exc)  # a task group's error, unwrapped
        if not isinstance(error, HermesError | OSError):
            raise
        _discard_if_unstarted(paths)
        if isinstance(error, ConfigError):
            console.print(f"[red]error:[/] {error}", highlight=False)
            return EXIT_CONFIG
        console.print(f"[red]error:[/] {type(error).__name__}: {error}", highlight=False)
        if paths.run.exists():
            console.print(f"the run can be continued with: {resume_command(paths)}")
        return EXIT_FAILED
    print_summary(console, result)
    return result.exit_code


def _discard_if_unstarted(paths: RunDirectory) -> None:
    """Remove a run directory this process created but never started (no run.json)."""
    if paths.run.exists():
        return
    lock = paths.root / ".lock"
    lock.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        paths.root.rmdir()
