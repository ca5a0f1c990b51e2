"""The Atropos source: train on the groups an Atropos environment sends to ``run-api``.

The trainer registers with ``run-api`` as Atropos' trainer (``POST /register``: the batch size
in sequences is ``groups_per_step * group_size``) and pulls one ``GET /batch`` per step. The
environment (``apps/atropos_env serve --env.lora_adapter FILE``) samples with the embedded
model and reloads ``FILE`` whenever the trainer replaces it, so the loop closes across
processes. Each group says which adapter sampled it (``group_overrides.lora_adapter_sha256``);
``policy_lag`` is how many updates behind the trainer's weights that adapter was. A group
sampled with the base weights or an adapter this trainer never wrote, :data:`BASE_WEIGHTS_LAG`
updates after its first adapter, means the environment does not load the trainer's
``--adapter``: a :class:`ConfigError` naming both options, not a silent run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
from hermes_protocols import BackendError, ConfigError
from hermes_rollouts import file_sha256, pull_batch, register_trainer

from hermes_trainer.samples import from_atropos_group
from hermes_trainer.source import Collected, Weights

#: updates after the trainer's first adapter from which a group sampled with other weights (the
#: base, or a file this trainer never wrote) is a misconfigured environment rather than an old
#: group (atroposlib's env samples at most ``max_batches_offpolicy``, default 3, batches ahead)
BASE_WEIGHTS_LAG = 4


@contextmanager
def run_api_errors(url: str) -> Iterator[None]:
    """HTTP failures talking to ``run-api`` as :class:`BackendError` naming it."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise BackendError(f"Atropos run-api at {url}: {type(exc).__name__}: {exc}") from exc


class AtroposFeed:
    """Batches pulled from ``run-api``; see the module doc."""

    def __init__(self, client: httpx.AsyncClient, *, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s
        #: the step after which each adapter was published (no adapter: the base weights)
        self._published: dict[str | None, int] = {None: 0}
        #: the adapter file last published (``None``: no update yet, only base weights)
        self._adapter: Path | None = None

    def _lag(self, group: Mapping[str, Any], step: int) -> int | None:
        sha = (group.get("group_overrides") or {}).get("lora_adapter_sha256")
        published = self._published.get(sha)
        if self._adapter is not None:
            self._check_adapter(sha, published, step)
        return None if published is None else step - 1 - published

    def _check_adapter(self, sha: str | None, published: int | None, step: int) -> None:
        """A group sampled with the base weights or a file this trainer never wrote is an old
        group for a few updates, then the sign of an environment loading another file."""
        first = min(at for key, at in self._published.items() if key is not None)
        behind = step - 1 - first
        if (sha is None or published is None) and behind >= BASE_WEIGHTS_LAG:
            sampler = (
                "the base weights"
                if sha is None
                else f"an adapter this trainer did not write (sha256 {sha[:12]})"
            )
            raise ConfigError(
                f"step {step}: the Atropos environment still samples with {sampler}, "
                f"{behind} updates after the trainer's first adapter: serve it with "
                f"--env.lora_adapter {self._adapter} (this trainer's --adapter), the file "
                "the trainer rewrites after each update"
            )

    async def collect(self, step: int) -> Collected:
        started = anyio.current_time()
        with run_api_errors(str(self._client.base_url)):
            batch = await pull_batch(self._client, timeout=self._timeout_s)
        groups = tuple(
            tuple(from_atropos_group(group, f"step {step} group {index}"))
            for index, group in enumerate(batch)
        )
        lags = [lag for group in batch if (lag := self._lag(group, step)) is not None]
        return Collected(
            groups=groups,
            generated_tokens=sum(sum(s.mask) for group in groups for s in group),
            seconds=anyio.current_time() - started,
            policy_lag=sum(lags) / len(lags) if len(lags) == len(batch) else None,
        )

    async def publish(self, adapter: Weights, step: int) -> None:
        self._published[await anyio.to_thread.run_sync(file_sha256, Path(adapter))] = step
        self._adapter = Path(adapter)


@asynccontextmanager
async def open_atropos_feed(
    url: str, *, batch_size: int, max_token_len: int, steps: int, timeout_s: float
) -> AsyncIterator[AtroposFeed]:
    """Register with ``run-api`` at ``url`` as the trainer of ``steps`` batches of
    ``batch_size`` sequences; the HTTP client is closed on exit."""
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        with run_api_errors(url):
            await register_trainer(
                client,
                batch_size=batch_size,
                max_token_len=max_token_len,
                num_steps=steps,
                wandb_group="hermes-trainer",
            )
        yield AtroposFeed(client, timeout_s=timeout_s)
