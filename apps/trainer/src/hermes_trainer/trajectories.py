"""The offline source: a batch runner's ``trajectories.jsonl``, grouped by item.

Records of one item (same ``env`` and ``item.id``) form a group, whatever order the runner
finished them in. Every epoch visits the groups once in an order shuffled by the seed; step
``k`` takes the next ``groups_per_step`` of them and the source ends after ``epochs`` passes.
Nothing samples again, so the rollouts grow more off-policy with every update: the importance
ratio (clipped) accounts for it, and ``|log ratio|`` in the metrics shows how far it went.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio.to_thread
from hermes_protocols import ConfigError
from hermes_protocols.formats import RunDirectory

from hermes_trainer.samples import Sample, from_trajectory
from hermes_trainer.source import Collected, Weights


def trajectory_file(path: Path) -> Path:
    """``path`` itself, or a run directory's ``trajectories.jsonl``."""
    return RunDirectory(path).trajectories if path.is_dir() else path


@contextmanager
def _reading(file: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise ConfigError(
            f"cannot read trajectories {file}: {exc.strerror}; pass a batch runner run "
            "directory or trajectories.jsonl as --trajectories"
        ) from exc


def check_readable(paths: Sequence[Path]) -> None:
    """Each path's trajectory file can be opened (:class:`ConfigError` naming it if not)."""
    for path in paths:
        file = trajectory_file(path)
        with _reading(file):
            file.open("rb").close()


def read_groups(paths: Sequence[Path], model_name: str | None) -> list[tuple[Sample, ...]]:
    """Every record of ``paths`` as groups (first-seen order). With ``model_name``, a record
    sampled by another model (its ``model`` is not ``embedded:<model_name>``) is an error."""
    groups: dict[tuple[str, str], list[Sample]] = {}
    for path in paths:
        file = trajectory_file(path)
        with _reading(file):
            lines = file.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{file}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise ConfigError(f"{file}:{number}: not a trajectory record")
            if model_name is not None and record.get("model") != f"embedded:{model_name}":
                raise ConfigError(
                    f"{file}:{number} was sampled by {record.get('model')!r}, not by the "
                    f"trainer's model (embedded:{model_name}); pass the sampler's GGUF as --model"
                )
            item = record.get("item") or {}
            key = (str(record.get("env")), str(item.get("id") if isinstance(item, dict) else ""))
            groups.setdefault(key, []).append(from_trajectory(record))
    return [tuple(group) for group in groups.values()]


class TrajectorySource:
    """Groups read from trajectory files; see the module doc."""

    def __init__(
        self, groups: Sequence[tuple[Sample, ...]], *, per_step: int, epochs: int, seed: int
    ) -> None:
        order: list[tuple[Sample, ...]] = []
        shuffler = random.Random(seed)
        for _ in range(epochs):
            epoch = list(groups)
            shuffler.shuffle(epoch)
            order.extend(epoch)
        self._order = order
        self._per_step = per_step

    @property
    def steps(self) -> int:
        """How many steps the source has groups for."""
        return -(-len(self._order) // self._per_step)

    async def collect(self, step: int) -> Collected | None:
        start = (step - 1) * self._per_step
        groups = self._order[start : start + self._per_step]
        if not groups:
            return None
        return Collected(groups=tuple(groups), generated_tokens=None, seconds=0.0)

    async def publish(self, adapter: Weights, step: int) -> None:
        """Nothing samples from it; the adapter stays on disk."""


@asynccontextmanager
async def open_trajectories(
    paths: Sequence[Path], model_name: str | None, *, per_step: int, epochs: int, seed: int
) -> AsyncIterator[TrajectorySource]:
    """Read the files (in a worker thread) into a source; see :func:`read_groups`."""
    groups = await anyio.to_thread.run_sync(read_groups, paths, model_name)
    if not groups:
        raise ConfigError(f"no trajectories in {', '.join(str(p) for p in paths)}")
    yield TrajectorySource(groups, per_step=per_step, epochs=epochs, seed=seed)
