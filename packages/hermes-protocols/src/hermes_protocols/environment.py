"""Environment vocabulary: items, scores, reward context, environments and scored rollouts."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from hermes_protocols.agent import AgentResult
from hermes_protocols.json_types import JSONObject
from hermes_protocols.messages import Message
from hermes_protocols.sandbox import FileTransfer, Slot, SlotImage


@attrs.frozen(slots=True)
class Item:
    """One dataset item or generated task. ``id`` is stable across runs with the same seed."""

    id: str
    data: JSONObject = attrs.field(factory=dict)
    split: str = "train"


class FailureKind(enum.StrEnum):
    MODEL = "model"
    INFRASTRUCTURE = "infrastructure"


@attrs.frozen(slots=True)
class Score:
    """A verifier's verdict. ``failure`` says whose fault a failed rollout was, if known."""

    reward: float
    metrics: Mapping[str, float] = attrs.field(factory=dict)
    failure: FailureKind | None = None
    details: str = ""


@runtime_checkable
class RewardContext(Slot, FileTransfer, Protocol):
    """The slot the agent used, handed to the verifier, plus what setup recorded."""

    @property
    def setup_metadata(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Environment(Protocol):
    """A source of tasks with workspace setup and verification.

    ``items`` yields items deterministically for a seed (finite or endless); ``toolsets`` names
    the toolsets the agent may use.
    """

    @property
    def name(self) -> str: ...

    @property
    def toolsets(self) -> Sequence[str]: ...

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]: ...

    def prompt(self, item: Item) -> Sequence[Message]: ...

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]: ...

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score: ...


@runtime_checkable
class ImageEnvironment(Protocol):
    """Capability of an environment whose items may run in their own container image.

    ``image_for(item)`` is the image the item's slot must run (``None``: any slot serves).
    ``for_sandbox(runs_images=...)`` is this environment set up for a pool that can (or cannot)
    run per-item images; it raises :class:`~hermes_protocols.errors.ConfigError` when the
    environment cannot do without them.
    """

    def image_for(self, item: Item) -> SlotImage | None: ...

    def for_sandbox(self, *, runs_images: bool) -> Environment: ...


@attrs.frozen(slots=True)
class RolloutFailure:
    """Why a rollout produced no usable score (infrastructure failed after its retries)."""

    kind: FailureKind
    phase: str
    message: str
    attempts: int = 1


@attrs.frozen(slots=True)
class ScoredRollout:
    """One finished rollout: the agent's result and either a score or a failure, never both."""

    id: str
    env: str
    item: Item
    group_index: int
    result: AgentResult | None
    score: Score | None
    failure: RolloutFailure | None = None
    timings: Mapping[str, float] = attrs.field(factory=dict)
    metadata: JSONObject = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if (self.score is None) == (self.failure is None):
            raise ValueError("a scored rollout has exactly one of score and failure")
