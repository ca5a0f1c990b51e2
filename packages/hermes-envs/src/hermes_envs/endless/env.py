"""The endless_terminals environment: item = (family, difficulty, seed) -> task."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
from hermes_protocols import (
    AgentResult,
    ConfigError,
    FailureKind,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
)

from hermes_envs._convert import int_tuple, str_tuple
from hermes_envs.endless import families_data, families_dev, families_files, families_text
from hermes_envs.endless.task import Draft, TerminalTask

Family = Callable[[random.Random, int], Draft]

FAMILIES: Mapping[str, Family] = MappingProxyType(
    {
        "sort_unique": families_text.sort_unique,
        "count_matches": families_text.count_matches,
        "replace_in_place": families_text.replace_in_place,
        "dedupe_ordered": families_text.dedupe_ordered,
        "line_range": families_text.line_range,
        "word_frequency": families_text.word_frequency,
        "column_extract": families_text.column_extract,
        "rename_extension": families_files.rename_extension,
        "make_tree": families_files.make_tree,
        "make_archive": families_files.make_archive,
        "extract_archive": families_files.extract_archive,
        "permissions": families_files.permissions,
        "find_large": families_files.find_large,
        "grep_recursive": families_files.grep_recursive,
        "symlink_latest": families_files.symlink_latest,
        "csv_sum": families_data.csv_sum,
        "csv_filter": families_data.csv_filter,
        "csv_to_json": families_data.csv_to_json,
        "json_extract": families_data.json_extract,
        "json_group": families_data.json_group,
        "top_ip": families_data.top_ip,
        "status_counts": families_data.status_counts,
        "git_commit": families_dev.git_commit,
        "git_branch": families_dev.git_branch,
        "git_revert_file": families_dev.git_revert_file,
        "shell_script": families_dev.shell_script,
        "python_fix": families_dev.python_fix,
        "env_merge": families_dev.env_merge,
        "write_word": families_text.write_word,
    }
)
DIFFICULTIES = (1, 2, 3)

SYSTEM_PROMPT = (
    "You are an expert Linux user working in a terminal. Your current working directory holds "
    "the task's files; use relative paths. Use your tools to change the files as asked, then "
    "reply with a short summary. Only the final state of the files is checked."
)


def generate_task(family: str, difficulty: int, seed: int) -> TerminalTask:
    """The task for ``(family, difficulty, seed)``; the same inputs give the same task."""
    try:
        make = FAMILIES[family]
    except KeyError:
        raise ConfigError(f"unknown task family {family!r}; known: {sorted(FAMILIES)}") from None
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty}")
    draft = make(random.Random(f"{family}:{difficulty}:{seed}"), difficulty)
    return TerminalTask(
        family=family,
        difficulty=difficulty,
        seed=seed,
        instruction=draft.instruction,
        files=draft.files,
        solution=draft.solution,
        checks=draft.checks,
        setup_script=draft.setup_script,
    )


def _known_families(_inst: object, _attr: object, value: Sequence[str]) -> None:
    unknown = [f for f in value if f not in FAMILIES]
    if unknown:
        raise ConfigError(f"unknown task families {unknown}; known: {sorted(FAMILIES)}")


def _known_levels(_inst: object, _attr: object, value: Sequence[int]) -> None:
    if not value or any(d not in DIFFICULTIES for d in value):
        raise ConfigError(f"difficulties must be a non-empty subset of {DIFFICULTIES}")


@attrs.frozen(slots=True)
class EndlessTerminalsConfig:
    """Which families and difficulty levels to draw from, and the setup timeout."""

    families: tuple[str, ...] = attrs.field(
        default=tuple(FAMILIES), converter=str_tuple, validator=_known_families
    )
    difficulties: tuple[int, ...] = attrs.field(
        default=DIFFICULTIES, converter=int_tuple, validator=_known_levels
    )
    setup_timeout: float = 60.0
    toolsets: tuple[str, ...] = attrs.field(default=("terminal", "file"), converter=str_tuple)


class EndlessTerminalsEnv:
    """Endless stream of terminal tasks. Reward 1.0 when every end-state check passes."""

    name = "endless_terminals"

    def __init__(self, config: EndlessTerminalsConfig | None = None) -> None:
        self.config = config or EndlessTerminalsConfig()

    @property
    def toolsets(self) -> Sequence[str]:
        return self.config.toolsets

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        """Endless: families round-robin, difficulty and task seed drawn from ``seed``."""
        rng = random.Random(f"endless:{seed}:{split}")
        for index in itertools.count():
            family = self.config.families[index % len(self.config.families)]
            level = rng.choice(self.config.difficulties)
            task_seed = rng.getrandbits(32)
            yield Item(
                id=f"{family}-d{level}-{task_seed:08x}",
                data={"family": family, "difficulty": level, "seed": task_seed},
                split=split,
            )

    def task(self, item: Item) -> TerminalTask:
        return generate_task(
            str(item.data["family"]), int(item.data["difficulty"]), int(item.data["seed"])
        )

    def prompt(self, item: Item) -> Sequence[Message]:
        return (Message.system(SYSTEM_PROMPT), Message.user(self.task(item).instruction))

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        task = self.task(item)
        await task.setup(slot, timeout=self.config.setup_timeout)
        return {"family": task.family, "difficulty": task.difficulty}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        task = self.task(item)
        passed = await task.check(ctx)
        ok = all(passed)
        return Score(
            reward=1.0 if ok else 0.0,
            metrics={
                "checks_passed": sum(passed) / len(passed),
                "difficulty": float(task.difficulty),
            },
            failure=None if ok else FailureKind.MODEL,
            details="" if ok else f"failed checks: {[i for i, p in enumerate(passed) if not p]}",
        )

    def oracle_solution(self, item: Item) -> str:
        """A shell script, run in the workspace, that solves the task."""
        return self.task(item).solution
