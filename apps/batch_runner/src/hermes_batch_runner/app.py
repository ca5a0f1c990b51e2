"""One batch run end to end: recover, wire, plan, execute, summarize, report."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path

import anyio
import attrs
from hermes_protocols import JSONObject
from hermes_protocols.formats import RunDirectory
from hermes_report import TokenizerFileError, TokenTexts, run_dir_records, write_report
from hermes_rollouts import Interruption, file_sha256, progress_bar, signals_watched
from rich.console import Console

from hermes_batch_runner.components import SavesTokenizer, Wiring
from hermes_batch_runner.config import RunConfig, config_to_json
from hermes_batch_runner.engine import (
    Outcome,
    PlannedRollout,
    RolloutFn,
    RolloutSink,
    Status,
    execute,
    plan_rollouts,
)
from hermes_batch_runner.errors import CorruptLogError
from hermes_batch_runner.filters import WriteFilters
from hermes_batch_runner.jsonl_log import JsonlLog, Recovery, RunLock, iter_records, recover_log
from hermes_batch_runner.retry import (
    HISTORY_FILE,
    count_infrastructure_failures,
    release_infrastructure_failures,
)
from hermes_batch_runner.run_dir import read_json, write_json_atomic
from hermes_batch_runner.summary import SessionStats, SummaryBuilder

EXIT_OK = 0
EXIT_INTERRUPTED = 130
Notice = Callable[[int], None]


@attrs.frozen(slots=True)
class RunResult:
    """How a run ended: the exit code, where its files are, and its summary."""

    exit_code: int
    paths: RunDirectory
    summary: JSONObject
    interrupted: bool


def resume_command(paths: RunDirectory) -> str:
    return f"uv run apps/batch_runner --output {paths.root} --resume"


def run_record(config: RunConfig, argv: list[str]) -> JSONObject:
    """What ``run.json`` holds: the resolved config plus facts a resume checks."""
    record: JSONObject = {
        "config": config_to_json(config),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "argv": list(argv),
    }
    if config.dataset:
        record["dataset_sha256"] = file_sha256(Path(config.dataset))
    return record


def _recover_all(paths: RunDirectory) -> tuple[frozenset[str], list[Recovery]]:
    recoveries = [recover_log(p) for p in paths.logs]
    done: set[str] = set()
    for path, recovery in zip(paths.logs, recoveries, strict=True):
        twice = done & recovery.ids
        if twice:
            raise CorruptLogError(f"{path}: id {sorted(twice)[0]!r} is also in another log")
        done |= recovery.ids
    return frozenset(done), recoveries


def _signal_notices(console: Console) -> tuple[Notice, Notice]:
    """What the run prints when a signal drains it and when a second one cancels it."""

    def drain(signum: int) -> None:
        console.print(
            "[yellow]stopping: finishing in-flight rollouts (press Ctrl-C again to cancel them)[/]"
        )

    def cancel(signum: int) -> None:
        console.print("[yellow]cancelling in-flight rollouts[/]")

    return drain, cancel


def write_report_html(paths: RunDirectory, *, title: str, console: Console | None = None) -> None:
    """Render ``report.html`` from the three logs (streamed), with token text from the run's
    ``tokenizer.json`` when it has one."""
    texts: TokenTexts | None = None
    if paths.tokenizer.is_file():
        try:
            texts = TokenTexts.from_file(paths.tokenizer)
        except TokenizerFileError as exc:
            if console is not None:
                console.print(f"[yellow]report shows token ids only: {exc}[/]")
    write_report(
        run_dir_records(paths.root),
        paths.report,
        title=title,
        token_text=texts,
        special_ids=texts.special_ids if texts is not None else (),
    )


def write_outputs(
    paths: RunDirectory,
    *,
    expected: int,
    session: SessionStats,
    title: str,
    console: Console | None = None,
) -> JSONObject:
    """Recompute ``summary.json`` from the three logs in one streamed pass, then
    ``report.html`` (hermes-report: charts, explorer, token view)."""
    builder = SummaryBuilder()
    for status, path in zip(("kept", "failed", "filtered"), paths.logs, strict=True):
        for record in iter_records(path):
            builder.add(status, record)
    summary = builder.result(expected=expected, session=session)
    write_json_atomic(paths.summary, summary)
    write_report_html(paths, title=title, console=console)
    return summary


async def run_batch(
    config: RunConfig,
    paths: RunDirectory,
    *,
    resume: bool,
    wiring: Wiring,
    console: Console,
    argv: list[str],
    handle_signals: bool = True,
    retry_failed: bool = False,
) -> RunResult:
    """Run (or resume) the batch described by ``config`` into ``paths``.

    A resumed run that is not finished retries the rollouts that failed for infrastructure
    reasons; ``retry_failed`` does so on a finished run too (see :mod:`.retry`). With
    ``handle_signals`` SIGINT/SIGTERM follow :mod:`hermes_rollouts.signal_policy` for the whole
    run, pool release and report included."""
    interruption = Interruption()
    on_drain, on_cancel = _signal_notices(console)
    watched: AbstractAsyncContextManager[None] = (
        signals_watched(interruption, on_drain=on_drain, on_cancel=on_cancel)
        if handle_signals
        else nullcontext()
    )
    async with watched:
        return await _run_batch(
            config,
            paths,
            resume=resume,
            wiring=wiring,
            console=console,
            argv=argv,
            retry_failed=retry_failed,
            interruption=interruption,
        )


async def _run_batch(
    config: RunConfig,
    paths: RunDirectory,
    *,
    resume: bool,
    wiring: Wiring,
    console: Console,
    argv: list[str],
    retry_failed: bool,
    interruption: Interruption,
) -> RunResult:
    started = time.perf_counter()
    with RunLock(paths.root):
        done, recoveries = await anyio.to_thread.run_sync(_recover_all, paths)
        for path, recovery in zip(paths.logs, recoveries, strict=True):
            if recovery.dropped_bytes:
                console.print(
                    f"[yellow]repaired {path.name}: removed a torn last line "
                    f"({recovery.dropped_bytes} bytes)[/]"
                )
        recorded = read_json(paths.run) if resume else {}
        expected_before = int(recorded.get("expected", -1))
        finished = resume and len(done) >= expected_before >= 0
        if resume and (retry_failed or not finished):
            retried = await anyio.to_thread.run_sync(release_infrastructure_failures, paths)
            if retried:
                done -= retried
                finished = False
                console.print(
                    f"retrying {len(retried)} rollouts that failed for infrastructure reasons "
                    f"(their failure records are kept in {HISTORY_FILE})"
                )
        if finished:
            # complete already: no need to load a model or start sandboxes
            console.print(f"resuming {paths.root}: all {len(done)} rollouts already done")
            infra = await anyio.to_thread.run_sync(count_infrastructure_failures, paths)
            if infra:
                console.print(
                    f"{infra} of them failed for infrastructure reasons; --retry-failed runs "
                    "them again"
                )
            session = SessionStats(wall_s=time.perf_counter() - started, rollouts=0,
                                   generated_tokens=0, active_s=0.0)  # fmt: skip
            title = f"{config.source} · {recorded.get('model', '')}"
            summary = await anyio.to_thread.run_sync(
                lambda: write_outputs(
                    paths,
                    expected=int(recorded["expected"]),
                    session=session,
                    title=title,
                    console=console,
                )
            )
            return RunResult(EXIT_OK, paths, summary, False)
        async with wiring(config) as components:
            if isinstance(components, SavesTokenizer) and not paths.tokenizer.exists():
                await components.save_tokenizer(paths.tokenizer)
            plan, expected = plan_rollouts(
                components.env_name, components.items, config.group_size, done
            )
            if not resume:
                record = run_record(config, argv)
                record.update(expected=expected, model=components.model)
                write_json_atomic(paths.run, record)
            if config.in_flight < config.concurrency:
                console.print(
                    f"[yellow]running {config.in_flight} rollouts at once: the sandbox pool has "
                    f"{config.in_flight} slots (raise --sandbox-slots or --sandbox-max-hosts)[/]"
                )
            if resume:
                console.print(
                    f"resuming {paths.root}: {len(done)} rollouts already done, {len(plan)} to go"
                )
            outcome = await _execute_with_progress(
                config,
                paths,
                plan,
                components.run_one,
                components.model,
                console,
                interruption,
            )
            model = components.model
        session = SessionStats(
            wall_s=time.perf_counter() - started,
            rollouts=outcome.finished,
            generated_tokens=outcome.generated_tokens,
            interrupted=outcome.interrupted,
            cancelled_in_flight=outcome.cancelled_in_flight,
            active_s=outcome.elapsed_s,
        )
        summary = await anyio.to_thread.run_sync(
            lambda: write_outputs(
                paths,
                expected=expected,
                session=session,
                title=f"{config.source} · {model}",
                console=console,
            )
        )
    exit_code = EXIT_OK
    if outcome.interrupted:
        exit_code = interruption.exit_code or EXIT_INTERRUPTED
    return RunResult(exit_code, paths, summary, outcome.interrupted)


async def _execute_with_progress(
    config: RunConfig,
    paths: RunDirectory,
    plan: Sequence[PlannedRollout],
    run_one: RolloutFn,
    model: str,
    console: Console,
    interruption: Interruption,
) -> Outcome:
    filters = WriteFilters(config.require_reasoning, config.min_reward)
    counts = {"kept": 0, "failed": 0, "filtered": 0}
    progress = progress_bar("rollouts", console=console, enabled=config.progress)
    task = progress.add_task("rollouts", total=len(plan), detail="")

    def finished(status: Status, record: JSONObject) -> None:
        counts[status] += 1
        progress.update(
            task,
            advance=1,
            detail=f"kept {counts['kept']} failed {counts['failed']} filtered {counts['filtered']}",
        )

    async with (
        JsonlLog(paths.trajectories) as kept,
        JsonlLog(paths.failed) as failed,
        JsonlLog(paths.filtered) as filtered,
    ):
        sink = RolloutSink(
            kept=kept, failed=failed, filtered=filtered, filters=filters, model=model
        )
        with progress:
            outcome = await execute(
                plan,
                run_one,
                sink,
                concurrency=config.in_flight,
                stop=interruption.drain,
                cancel=interruption.cancel,
                drain_timeout=config.drain_timeout,
                on_finished=finished,
            )
        outcome.generated_tokens = sink.generated_tokens
    return outcome
