"""The environment check's checks that need no sandbox: items, splits, item data, prompts."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from hermes_protocols import Environment, Item, json_problem

from hermes_rollouts.check_report import CheckResult, Status

#: how many items of a split the checks look at (an endless environment never ends)
SAMPLE = 32

ITEMS = "items(seed) deterministic, unique ids"
SPLITS = "train/test splits disjoint"
ITEM_DATA = "item data is plain JSON"
PROMPTS = "prompts are non-empty"


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _sample(env: Environment, seed: int, split: str) -> list[Item]:
    return list(itertools.islice(env.items(seed=seed, split=split), SAMPLE))


def guarded(name: str, check: Callable[[], tuple[Status, str]]) -> CheckResult:
    """Run one check; an exception of the environment's code fails it with that exception."""
    try:
        status, detail = check()
    except Exception as exc:
        status, detail = Status.FAIL, f"raised {one_line(exc)}"
    return CheckResult(name, status, detail)


def check_items(env: Environment, *, seed: int, count: int) -> tuple[list[CheckResult], list[Item]]:
    """The four checks, and the first ``count`` train items the sandbox checks run."""
    train: list[Item] = []

    def items() -> tuple[Status, str]:
        train.extend(_sample(env, seed, "train"))
        if not train:
            return Status.FAIL, f"items(seed={seed}, split='train') yields no item"
        again = _sample(env, seed, "train")
        if again != train:
            differ = next(
                (i for i, (a, b) in enumerate(zip(train, again, strict=False)) if a != b),
                min(len(train), len(again)),
            )
            return Status.FAIL, f"two calls with seed {seed} differ at item {differ}"
        twice = [i for i, n in Counter(item.id for item in train).items() if n > 1]
        if twice:
            return Status.FAIL, f"id {twice[0]!r} appears twice in the first {len(train)} items"
        return Status.PASS, f"{len(train)} items, the same for seed {seed} twice, ids unique"

    results = [guarded(ITEMS, items)]
    results.append(guarded(SPLITS, lambda: _splits(env, seed, train)))
    results.append(guarded(ITEM_DATA, lambda: _item_data(train)))
    chosen = train[:count]
    results.append(guarded(PROMPTS, lambda: _prompts(env, chosen)))
    return results, chosen


def _ids(items: Iterable[Item]) -> list[str]:
    return [item.id for item in items]


def _splits(env: Environment, seed: int, train: Sequence[Item]) -> tuple[Status, str]:
    test = _sample(env, seed, "test")
    if not test:
        return Status.SKIP, "no test split: items(split='test') yields nothing"
    if _ids(test) == _ids(train):
        return Status.SKIP, (
            "one task set: train and test yield the same items (hold items out with the "
            "environment's own config to evaluate)"
        )
    shared = [i for i in _ids(test) if i in set(_ids(train))]
    if shared:
        return Status.FAIL, (
            f"{len(shared)} of the first {len(test)} test ids are train ids too, e.g. {shared[0]!r}"
        )
    return Status.PASS, f"the first {len(train)} train and {len(test)} test ids share none"


def _item_data(items: Sequence[Item]) -> tuple[Status, str]:
    for item in items:
        if not isinstance(item.id, str) or not item.id:
            return Status.FAIL, f"item id {item.id!r} is not a non-empty str"
        problem = json_problem(item.data, f"item {item.id!r} data")
        if problem is not None:
            return Status.FAIL, problem
    return Status.PASS, f"{len(items)} items: ids are strings, data plain JSON"


def _prompts(env: Environment, items: Sequence[Item]) -> tuple[Status, str]:
    for item in items:
        messages = list(env.prompt(item))
        if not any(m.role == "user" and (m.content or "").strip() for m in messages):
            return Status.FAIL, f"prompt of item {item.id!r} has no non-empty user message"
    return Status.PASS, f"{len(items)} prompt(s), each with a user message"
