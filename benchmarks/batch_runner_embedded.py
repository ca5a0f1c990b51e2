"""apps/batch_runner with the embedded model opened at ``--concurrency`` KV-cache sequences.

The batch runner's model factory does not pass its concurrency to the embedded model yet (one
sequence: rollouts take turns). This script runs the same CLI with the same flags, wiring the
embedded model with ``concurrency = min(--concurrency, slots)`` so that every rollout in flight
has its own sequence in the continuous-batching scheduler:

    uv run --frozen --no-sync python -m benchmarks.batch_runner_embedded \\
        --num-items 8 --concurrency 8 --max-tokens 128 --max-turns 2 --temperature 1.0 \\
        --sandbox-slots 8 --output /tmp/run

``--embedded-threads N`` (this script's own flag) sets llama.cpp's thread count (default: the
physical cores). Only the embedded server type is supported here.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from hermes_batch_runner.cli import main as cli_main
from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials
from hermes_batch_runner.environments import build_environment
from hermes_batch_runner.inference import ModelParts, get_parser
from hermes_batch_runner.sandboxes import build_backend, build_toolsets, pool_config
from hermes_batch_runner.wiring import RunnerComponents, pool_name
from hermes_loop.embedded import EmbeddedModel
from hermes_sandbox import SlotPool as SandboxPool


@asynccontextmanager
async def concurrent_embedded(
    config: RunConfig, *, threads: int | None = None
) -> AsyncIterator[RunnerComponents]:
    """The real components, with the embedded model at the run's concurrency."""
    if config.server_type != "embedded":
        raise SystemExit("this script only drives the embedded model")
    environment, items = build_environment(config)
    toolsets = build_toolsets(config)
    backend = build_backend(config, Credentials())
    pool_cfg = pool_config(config, pool_name(config.output or "default"))
    model = await EmbeddedModel.open(
        config.model,
        n_ctx=config.context_tokens,
        concurrency=config.in_flight,
        n_threads=threads,
        timeout_s=config.rollout_timeout,
    )
    async with model, SandboxPool(backend, pool_cfg) as pool:
        parts = ModelParts(
            model.token_model(get_parser(config.parser)), f"embedded:{model.path.name}"
        )
        components = RunnerComponents(config, environment, items, pool, parts, toolsets)
        components.check_toolsets()
        yield components


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    threads = None
    if "--embedded-threads" in arguments:
        at = arguments.index("--embedded-threads")
        threads = int(arguments[at + 1])
        del arguments[at : at + 2]
    return cli_main(arguments, wiring=functools.partial(concurrent_embedded, threads=threads))


if __name__ == "__main__":
    raise SystemExit(main())
