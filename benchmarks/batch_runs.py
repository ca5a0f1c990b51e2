"""Run the batch runner's own code on given components, quietly, for the benchmarks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from hermes_batch_runner.app import run_batch
from hermes_batch_runner.components import Components
from hermes_batch_runner.config import RunConfig, config_from_options
from hermes_batch_runner.jsonl_log import read_records
from hermes_batch_runner.run_dir import prepare_run_dir
from hermes_batch_runner.wiring import OPTION_NAMES, SessionComponents, rollout_spec
from hermes_rollouts import Credentials, RolloutSpec, open_session
from rich.console import Console

Wiring = Callable[[RunConfig], AbstractAsyncContextManager[Components]]


def fixed(components: Components) -> Wiring:
    """A wiring that hands out ``components`` (already open) for every run."""

    @asynccontextmanager
    async def wiring(_config: RunConfig) -> AsyncIterator[Components]:
        yield components

    return wiring


async def run_once(root: Path, options: dict[str, Any], wiring: Wiring) -> dict[str, Any]:
    """One batch into ``root`` with ``options``; its ``session`` summary. Raises when a rollout
    failed (nothing to measure)."""
    config = config_from_options({**options, "output": str(root), "progress": False})
    result = await run_batch(
        config,
        prepare_run_dir(root, resume=False),
        resume=False,
        wiring=wiring,
        console=Console(stderr=True, quiet=True),
        argv=[],
        handle_signals=False,
    )
    session, counts = result.summary["session"], result.summary["counts"]
    assert isinstance(session, dict)
    assert isinstance(counts, dict)
    if counts["kept"] != counts["expected"]:
        failures = [r["failure"] for r in read_records(root / "failed.jsonl")]
        raise RuntimeError(f"benchmark rollouts failed, nothing to measure: {failures[:2]}")
    return session


async def tokens_and_time(
    root: Path,
    options: dict[str, Any],
    adjust: Callable[[RolloutSpec], RolloutSpec] = lambda spec: spec,
) -> tuple[int, float]:
    """(generated tokens, active seconds) of one batch with ``options`` on a session of its
    own (the model loaded afresh), its spec first passed through ``adjust``."""
    config = config_from_options({**options, "output": str(root), "progress": False})
    spec = adjust(rollout_spec(config, Credentials()))

    @asynccontextmanager
    async def wiring(_config: RunConfig) -> AsyncIterator[Components]:
        async with open_session(spec, option_names=OPTION_NAMES) as session:
            yield SessionComponents(config, session)

    summary = await run_once(root, options, wiring)
    return int(summary["generated_tokens"]), float(summary["active_s"])
