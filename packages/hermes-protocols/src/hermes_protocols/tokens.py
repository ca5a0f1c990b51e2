"""Token traces: ids, loss mask and logprobs that stay aligned by construction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

import attrs

TokenSource: TypeAlias = Literal["sampler", "retokenized"]
LogprobMode: TypeAlias = Literal["sampled", "raw"]
"""Which distribution a recorded logprob comes from.

``sampled``: the distribution the token was actually drawn from (temperature, top-k and top-p
applied, renormalized): the behaviour policy an importance ratio needs. ``raw``: the model's
untempered log-softmax.
"""


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def _floats(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(values)


def _check_aligned(instance: TokenTrace, _attribute: object, _value: object) -> None:
    n = len(instance.ids)
    if len(instance.mask) != n or len(instance.logprobs) != n:
        raise ValueError(
            f"token trace is misaligned: {n} ids, {len(instance.mask)} mask entries, "
            f"{len(instance.logprobs)} logprobs"
        )


@attrs.frozen(slots=True)
class TokenTrace:
    """A token sequence with a per-token loss mask (1 = trainable) and logprobs.

    Non-trainable positions (prompt, tool results, template bridges) carry logprob 0.0 and mask 0;
    trainable positions carry the sampler's logprob. ``source`` is ``"sampler"`` when the ids are
    what the sampler produced and ``"retokenized"`` when they were rebuilt from text (phase 1);
    retokenized traces are never sampler-exact training data. ``missing_logprobs`` lists the
    trainable positions whose logprob the engine did not return (their logprob is NaN);
    ``logprob_mode`` the distribution the logprobs come from (``None``: no logprobs, or turns
    of different modes).
    """

    ids: tuple[int, ...] = attrs.field(default=(), converter=_ints, validator=_check_aligned)
    mask: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    logprobs: tuple[float, ...] = attrs.field(default=(), converter=_floats)
    source: TokenSource = "sampler"
    missing_logprobs: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    logprob_mode: LogprobMode | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def append_context(self, ids: Sequence[int]) -> TokenTrace:
        """Return a trace extended with non-trainable ids (prompt, tool results, bridges)."""
        return TokenTrace(
            ids=self.ids + tuple(ids),
            mask=self.mask + (0,) * len(ids),
            logprobs=self.logprobs + (0.0,) * len(ids),
            source=self.source,
            missing_logprobs=self.missing_logprobs,
            logprob_mode=self.logprob_mode,
        )

    def append_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], missing: Sequence[int] = ()
    ) -> TokenTrace:
        """Return a trace extended with sampled ids and their logprobs (trainable); ``missing``
        are positions within ``ids`` that have no logprob."""
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} generated ids but {len(logprobs)} logprobs")
        offset = len(self.ids)
        return TokenTrace(
            ids=self.ids + tuple(ids),
            mask=self.mask + (1,) * len(ids),
            logprobs=self.logprobs + tuple(logprobs),
            source=self.source,
            missing_logprobs=self.missing_logprobs + tuple(offset + p for p in missing),
            logprob_mode=self.logprob_mode,
        )

    @property
    def num_trainable(self) -> int:
        return sum(self.mask)


@attrs.frozen(slots=True)
class DriftReport:
    """Difference between the trace and a re-render + re-tokenization of the final messages.

    ``mismatches`` and ``positions`` (the first differing indices, capped) cover only regions
    whose *text* differs: real drift, the re-render is not what the model saw.
    ``noncanonical_tokens`` counts trace ids in regions that decode to the same text as the
    re-tokenization (the model sampled a non-canonical tokenization of its own text, which
    re-tokenizing can never reproduce: exactly why the trace is kept), in
    ``noncanonical_regions`` regions; ``lossy_tokens`` counts ids equal only through U+FFFD
    (bytes that are no valid UTF-8, e.g. a character cut by ``max_tokens``). Neither is drift.
    ``length_delta`` is ``len(retokenized) - len(trace)`` over everything.
    """

    mismatches: int
    length_delta: int
    positions: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    noncanonical_tokens: int = 0
    noncanonical_regions: int = 0
    lossy_tokens: int = 0

    @property
    def drifted(self) -> bool:
        return self.mismatches > 0
