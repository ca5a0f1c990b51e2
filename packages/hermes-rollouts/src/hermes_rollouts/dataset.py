"""hermes-agent's batch dataset format and an environment that runs its prompts.

One JSON object per line: ``prompt`` (required, non-empty string), optional ``image`` /
``docker_image`` / ``cwd`` (strings) and ``id`` (string or integer). Item ids are the ``id``
field when given, else a hash of the line's content (stable when lines are reordered). Ids are
unique: an id already taken (a repeated line, a repeated ``id``) gets the first free ``-2``,
``-3``, ... suffix, so ``a``, ``a``, ``a-2`` load as ``a``, ``a-2``, ``a-2-2``. Invalid lines are
reported with their line number.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from hermes_envs import DatasetError
from hermes_protocols import (
    AgentResult,
    Item,
    JSONObject,
    Message,
    RewardContext,
    Score,
    Slot,
    json_error,
)

_OPTIONAL_STRINGS = ("image", "docker_image", "cwd", "system_prompt")


@attrs.frozen(slots=True)
class BadLine:
    lineno: int
    reason: str


@attrs.frozen(slots=True)
class LoadedDataset:
    items: tuple[Item, ...]
    bad_lines: tuple[BadLine, ...]


def _check_line(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "'prompt' must be a non-empty string"
    for key in _OPTIONAL_STRINGS:
        if key in value and value[key] is not None and not isinstance(value[key], str):
            return f"{key!r} must be a string"
    if "id" in value and (isinstance(value["id"], bool) or not isinstance(value["id"], str | int)):
        return "'id' must be a string or an integer"
    return None


def load_dataset(path: str | Path, *, skip_bad_lines: bool) -> LoadedDataset:
    """Read a batch JSONL file; invalid lines raise :class:`DatasetError` unless skipped."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset {file}: {exc}") from exc
    items: list[Item] = []
    bad: list[BadLine] = []
    used: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(BadLine(lineno, f"not valid JSON ({json_error(exc)})"))
            continue
        problem = _check_line(value)
        if problem is not None:
            bad.append(BadLine(lineno, problem))
            continue
        item_id = _free_id(str(value["id"]) if "id" in value else _content_id(value), used)
        used.add(item_id)
        data: JSONObject = {k: v for k, v in value.items() if k != "id"}
        data["line"] = lineno
        items.append(Item(id=item_id, data=data))
    if bad and not skip_bad_lines:
        listed = "; ".join(f"line {b.lineno}: {b.reason}" for b in bad[:10])
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise DatasetError(
            f"{file}: {len(bad)} invalid line(s): {listed}{more}. Fix them, or pass "
            "--skip-bad-lines to skip them"
        )
    if not items:
        raise DatasetError(f"{file}: no valid items")
    return LoadedDataset(tuple(items), tuple(bad))


def _free_id(base: str, used: set[str]) -> str:
    candidate, suffix = base, 1
    while candidate in used:
        suffix += 1
        candidate = f"{base}-{suffix}"
    return candidate


def _content_id(value: Mapping[str, Any]) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()[:16]


class DatasetEnvironment:
    """Runs dataset prompts as they are: no verifier, so every reward is 0.0 and the score's
    ``verified`` metric is 0.0 (the trajectories are the product, as in hermes-agent)."""

    name = "dataset"

    def __init__(
        self,
        items: Sequence[Item],
        toolsets: Sequence[str],
        *,
        system_prompt: str | None = None,
    ) -> None:
        self._items = tuple(items)
        self._toolsets = tuple(toolsets)
        self._system_prompt = system_prompt

    @property
    def toolsets(self) -> Sequence[str]:
        return self._toolsets

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        return iter(self._items)

    def prompt(self, item: Item) -> Sequence[Message]:
        system = item.data.get("system_prompt") or self._system_prompt
        messages = [Message.system(str(system))] if system else []
        messages.append(Message.user(str(item.data["prompt"])))
        return messages

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        cwd = item.data.get("cwd")
        if isinstance(cwd, str) and cwd:
            await slot.exec(f"mkdir -p -- {shlex.quote(cwd)}", timeout=30.0)
        return {"cwd": cwd}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        return Score(reward=0.0, metrics={"verified": 0.0}, details="dataset item: no verifier")
