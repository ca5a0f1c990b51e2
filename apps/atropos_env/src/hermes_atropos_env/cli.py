"""Command line: ``atropos_env serve|process|evaluate [--env.* ...] [--openai.* ...]
[--config file.yaml]``.

The configuration is parsed and checked here, before any model or sandbox starts, so a config
that makes no sense fails within seconds. The environment is then built with explicit config
objects (a list-wrapped server config; wandb on only when a key is configured) and atroposlib's
own run loop for the command is started.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
from hermes_protocols import ConfigError, HermesError
from hermes_rollouts import (
    EMBEDDED_TOOLSETS,
    Credentials,
    Interruption,
    default_prefill,
    environments_text,
    interrupted_exit_code,
    reference_slug,
    root_error,
    signals_watched,
)

from hermes_atropos_env.cli_args import build_configs, parse_argv
from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.credentials import modal_credentials_configured, wandb_key_configured
from hermes_atropos_env.source import RolloutSourceFactory
from hermes_atropos_env.validation import validate_config

COMMANDS = ("serve", "process", "evaluate")
Notice = Callable[[int], None]

USAGE = """\
usage: atropos_env {serve,process,evaluate} [--env.NAME VALUE ...] [--openai.NAME VALUE ...]
                   [--config FILE.yaml]

Run a hermes-envs environment as an Atropos (atroposlib 0.4.0) environment.

  serve     register with a running `run-api --host 127.0.0.1 --port N` and stream groups
  process   generate --env.total_steps groups offline: JSONL + HTML under runs/atropos/
            (--env.data_path_to_save_groups); with the embedded model 2 groups of 4 by default
  evaluate  run the eval split, write metrics.json + samples.jsonl under runs/atropos/
            (--env.data_dir_to_save_evals)

Phases: --openai.server_type embedded (default: in-process SmolLM2, exact tokens), sglang, vllm,
llama_cpp (exact tokens from a server at --openai.base_url) or openai (chat, re-tokenized).
--env.environment is a shipped or installed name, package.module:NAME or path/to/file.py:NAME;
`atropos_env --list-envs` lists the available ones. See docs/atropos.md for every option.
"""


def options_help() -> str:
    """Every ``--env.*`` and ``--openai.*`` option with its default and description."""
    lines: list[str] = []
    for namespace, model in (("env", HermesAtroposEnvConfig), ("openai", InferenceConfig)):
        lines.append(f"\n--{namespace}.* options:")
        for name, field in model.model_fields.items():
            default = "" if field.is_required() else f" (default: {field.default!r})"
            lines.append(f"  --{namespace}.{name}{default}\n      {field.description or ''}")
    return "\n".join(lines)


class Wiring(Protocol):
    """What the CLI needs from the wired hermes-rl packages."""

    def problems(self, env: HermesAtroposEnvConfig, inference: InferenceConfig) -> list[str]:
        """The rollout spec's problems, in this CLI's option names."""
        ...

    def tokenizer_dir(self, env: HermesAtroposEnvConfig, inference: InferenceConfig) -> str:
        """The HF tokenizer directory atroposlib loads (the embedded model's export)."""
        ...

    @property
    def source_factory(self) -> RolloutSourceFactory: ...


#: ``--env.*`` defaults with the embedded model: the terminal tool with a demonstration (without
#: one it calls no tool), and equal-score groups sent (its rewards are mostly all 0: dropping
#: them starves the trainer)
EMBEDDED_DEFAULTS: dict[str, Any] = {
    "enabled_toolsets": list(EMBEDDED_TOOLSETS),
    "ensure_scores_are_not_same": False,
}


#: where ``process`` and ``evaluate`` write by default (``runs/`` is git-ignored, as the batch
#: runner's runs are)
OUTPUT_DIR = "runs/atropos"
#: ``process`` with the embedded model: a few groups (atroposlib's default of 1,000 takes
#: hours on a CPU); ``--env.total_steps`` asks for more
EMBEDDED_PROCESS_GROUPS = 2


def uses_embedded_model(parsed_openai: dict[str, Any]) -> bool:
    """Whether ``--openai.*`` selects the in-process model (no server URL)."""
    return parsed_openai.get("server_type", "embedded") == "embedded" and not parsed_openai.get(
        "base_url"
    )


def command_defaults(
    command: str, parsed_env: dict[str, Any], *, wandb_available: bool, embedded: bool = False
) -> dict[str, Any]:
    """Per-command defaults (atroposlib's, minus its forced wandb; small budgets and a
    demonstration for the embedded model)."""
    environment = reference_slug(str(parsed_env.get("environment", "endless_terminals")))
    defaults: dict[str, Any] = {
        "wandb_name": f"hermes_{environment}",
        "use_wandb": wandb_available,
    }
    if embedded:
        defaults.update(EMBEDDED_DEFAULTS)
        enabled = parsed_env.get("enabled_toolsets", EMBEDDED_DEFAULTS["enabled_toolsets"])
        prefill = default_prefill(None, embedded=True, enabled=tuple(enabled or ()), dataset=False)
        if prefill is not None:
            defaults["prefill_messages"] = prefill
    if command == "process":
        defaults.update(
            ensure_scores_are_not_same=False,
            include_messages=True,
            data_path_to_save_groups=f"{OUTPUT_DIR}/hermes_{environment}.jsonl",
        )
        if embedded:
            defaults.update(total_steps=EMBEDDED_PROCESS_GROUPS)
    elif command == "evaluate":
        defaults.update(data_dir_to_save_evals=f"{OUTPUT_DIR}/hermes_{environment}_eval")
    return defaults


def resolve_wandb(env: HermesAtroposEnvConfig, *, wandb_available: bool) -> str | None:
    """Turn wandb off when no key is configured; returns the notice to print, if any."""
    if env.use_wandb and not wandb_available:
        env.use_wandb = False
        return (
            "notice: wandb disabled: no WANDB_API_KEY or ~/.netrc entry for api.wandb.ai "
            "(run `wandb login` to enable it)"
        )
    return None


def prepare(
    argv: Sequence[str], wiring: Wiring
) -> tuple[str, HermesAtroposEnvConfig, InferenceConfig, list[str]]:
    """Parse and check everything that can be checked before starting anything."""
    parsed = parse_argv(argv, COMMANDS)
    home = Path.home()
    wandb_available = wandb_key_configured(os.environ, home)
    defaults = command_defaults(
        parsed.command,
        parsed.env,
        wandb_available=wandb_available,
        embedded=uses_embedded_model(parsed.openai),
    )
    env, inference = build_configs(parsed, defaults)
    validate_config(
        env,
        inference,
        spec_problems=wiring.problems(env, inference),
        modal_credentials=modal_credentials_configured(os.environ, home),
    )
    notices = [n for n in [resolve_wandb(env, wandb_available=wandb_available)] if n]
    return parsed.command, env, inference, notices


async def _command(command: str, env_obj: Any) -> None:
    if command == "serve":
        await env_obj.env_manager()
    elif command == "process":
        await env_obj.process_manager()
    else:
        await env_obj._run_evaluate()


async def _run(command: str, env_obj: Any, interruption: Interruption) -> Path | None:
    """Run the command under the signal policy (:mod:`hermes_rollouts.signal_policy`): a first
    signal starts no new group and lets those in flight finish (for up to
    ``--env.drain_timeout``), a second cancels them; the pool and the model are released inside
    the loop. ``process`` then writes its report (also when interrupted): its path."""
    timeout = float(env_obj.config.drain_timeout)
    on_drain, on_cancel = _signal_notices(command, timeout)
    async with signals_watched(interruption, on_drain=on_drain, on_cancel=on_cancel):
        try:
            async with anyio.create_task_group() as work:
                work.start_soon(_cancel_after_drain, env_obj, interruption, work.cancel_scope)
                await _command(command, env_obj)
                work.cancel_scope.cancel()
        except Exception as exc:
            if not interruption.drain.is_set():
                raise
            # what the stop cut short (e.g. run-api stopped with us) is no error of the run
            error = _last_attempt(root_error(exc))
            print(
                f"atropos_env {command}: while stopping: {type(error).__name__}: {error}",
                file=sys.stderr,
            )
        report = None
        if command == "process":
            env_obj.close_output()
            report = await anyio.to_thread.run_sync(_process_report, env_obj)
    return report


def _last_attempt(error: BaseException) -> BaseException:
    """The error of the last try behind atroposlib's retries (tenacity's ``RetryError``)."""
    attempt = getattr(error, "last_attempt", None)
    inner = attempt.exception() if attempt is not None else None
    return inner if isinstance(inner, BaseException) else error


def _signal_notices(command: str, timeout: float) -> tuple[Notice, Notice]:
    """What the command prints when a signal drains it and when a second one cancels it."""

    def drain(signum: int) -> None:
        print(
            f"atropos_env {command}: {signal.Signals(signum).name}: stopping: finishing in-flight "
            f"groups for up to {timeout:g} s (--env.drain_timeout; press Ctrl-C again to cancel "
            "them)",
            file=sys.stderr,
        )

    def cancel(signum: int) -> None:
        print(f"atropos_env {command}: cancelling in-flight groups", file=sys.stderr)

    return drain, cancel


async def _cancel_after_drain(env_obj: Any, interruption: Interruption, work: Any) -> None:
    """Once draining: take no new item, wait until no group is in flight (``process`` ends its
    own loop), a second signal or the drain timeout, then cancel ``work``."""
    await interruption.drain.wait()
    env_obj.stop_taking_items()
    with anyio.move_on_after(float(env_obj.config.drain_timeout)):
        while env_obj.busy and not interruption.cancel.is_set():
            with anyio.move_on_after(0.2):
                await interruption.cancel.wait()
    work.cancel()


def _process_report(env_obj: Any) -> Path | None:
    """Write the report of ``process``'s JSONL (atroposlib may have renamed it) if it exists.
    Blocking."""
    from hermes_atropos_env.report import write_process_report

    groups = Path(env_obj.config.data_path_to_save_groups)
    if not groups.is_file():
        return None
    return write_process_report(groups, env_obj.config.tokenizer_name)


def run(argv: Sequence[str], wiring: Wiring) -> int:
    """Parse, check, build the environment and run the command's loop."""
    from hermes_atropos_env.env import HermesAtroposEnv

    command, env, inference, notices = prepare(argv, wiring)
    outputs = _new_outputs(command, env)
    for notice in notices:
        print(notice, file=sys.stderr)
    env.tokenizer_name = wiring.tokenizer_dir(env, inference)
    env_obj = HermesAtroposEnv.create(env, inference, wiring.source_factory)
    if command == "process":
        env_obj.process_mode = True
        env_obj.n_groups_to_process = env.total_steps
        env_obj.group_size_to_process = env.group_size
    print(
        f"atropos_env {command}: environment={env.environment} pool={env.tool_pool_mode} "
        f"server_type={inference.server_type} group_size={env.group_size} "
        f"wandb={'on' if env.use_wandb else 'off'}",
        file=sys.stderr,
    )
    if command == "process":
        print(
            f"atropos_env process: {env.total_steps} groups of {env.group_size} rollouts "
            f"(--env.total_steps, --env.group_size) into {env.data_path_to_save_groups}",
            file=sys.stderr,
        )
    interruption = Interruption()
    try:
        report = anyio.run(_run, command, env_obj, interruption)
    except Exception as exc:
        _remove_empty(outputs)
        raise _user_error(command, env, root_error(exc)) from exc
    if command == "process":
        print(f"wrote {env_obj.config.data_path_to_save_groups}", file=sys.stderr)
        if report is not None:
            print(f"wrote {report}", file=sys.stderr)
    if interruption.signum is None:
        return 0
    name = signal.Signals(interruption.signum).name
    print(
        f"atropos_env {command}: stopped by {name}; sandboxes and model released", file=sys.stderr
    )
    print(_next_time(command, env, env_obj), file=sys.stderr)
    return interruption.exit_code or 0


def _next_time(command: str, env: HermesAtroposEnvConfig, env_obj: Any) -> str:
    """What to type to go on after an interrupted command (there is nothing to resume)."""
    if command == "process":
        done = int(env_obj.curr_step)
        return (
            f"interrupted after {done} of {env.total_steps} groups (kept above); to generate "
            f"the other {env.total_steps - done}, run process again with --env.total_steps "
            f"{env.total_steps - done} and another --env.seed (it writes a new file)"
        )
    if command == "serve":
        return "to continue feeding the trainer, start serve again (groups are not resumed)"
    return (
        "the evaluation was cut short: its metrics cover the items done; run evaluate again "
        "for the whole split"
    )


def _new_outputs(command: str, env: HermesAtroposEnvConfig) -> list[Path]:
    """What ``process`` will create that does not exist yet: its files, then the directories
    above them, deepest first (removed again if the run fails while they are empty)."""
    if command != "process" or not env.data_path_to_save_groups:
        return []
    jsonl = Path(env.data_path_to_save_groups)
    created = (jsonl, jsonl.with_suffix(".html"), jsonl.parent, *jsonl.parent.parents)
    return [p for p in created if not p.exists()]


def _remove_empty(paths: Sequence[Path]) -> None:
    for path in paths:
        if path.is_file() and path.stat().st_size == 0:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _user_error(command: str, env: HermesAtroposEnvConfig, error: BaseException) -> BaseException:
    """The error to report for a failed run: an unreachable run-api (a connection error, maybe
    the cause of atroposlib's retry error) says where it looked."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    if command == "serve" and cause is not None:
        return RunApiUnreachable(
            f"cannot reach the Atropos run-api at {env.rollout_server_url} "
            f"({type(cause).__name__}: {cause}); start it (`run-api --host 127.0.0.1 --port "
            "8000`) or point --env.rollout_server_url at it"
        )
    return error


class RunApiUnreachable(HermesError):
    """``serve`` could not talk to the Atropos run-api."""


def _drop_status_polling(record: logging.LogRecord) -> bool:
    """atroposlib logs its 10 Hz status poll at INFO; keep everything else."""
    message = str(record.msg)
    return not message.startswith(("env_manager: Status dict", "max_num_workers:"))


def main(argv: Sequence[str] | None = None, wiring: Wiring | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--list-envs" in args:
        print(environments_text())
        return 0
    if not args or args[0] in ("-h", "--help") or "--help" in args or "-h" in args:
        print(USAGE + options_help())
        return 0 if args else 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("atroposlib.envs.base").addFilter(_drop_status_polling)
    if wiring is None:
        from hermes_atropos_env.wiring import HermesWiring

        wiring = HermesWiring(Credentials.from_environ(os.environ))
    try:
        return run(args, wiring)
    except KeyboardInterrupt:  # Ctrl-C before the run's signal policy was installed
        print("atropos_env: interrupted before the run started", file=sys.stderr)
        return interrupted_exit_code(signal.SIGINT)
    except Exception as exc:
        error = root_error(exc)
        if isinstance(error, ConfigError):
            print(f"atropos_env: {error}", file=sys.stderr)
            return 2
        if isinstance(error, HermesError | OSError):
            print(f"atropos_env: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
        raise
