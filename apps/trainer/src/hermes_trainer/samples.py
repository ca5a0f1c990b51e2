"""One finished rollout as the learner needs it, from each place rollouts come from.

A :class:`Sample` is the sampler's exact ids, the loss mask (1 = sampled by the policy), the
sampler's logprob of each of those tokens, the temperature they were drawn at and the
verifier's reward (``None``: the rollout failed and never trains). The three converters read
the trainer's own rollouts (:class:`~hermes_protocols.ScoredRollout`), an Atropos ``run-api``
group (``tokens``/``masks``/``inference_logprobs``/``scores``, as hermes_atropos_env sends it)
and a batch runner trajectory record. Anything that is not sampler-exact raises
:class:`FidelityError`: training on it would silently train on the wrong tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import HermesError, ScoredRollout
from hermes_protocols.formats import (
    ATROPOS_MASKED,
    AtroposGroup,
    TokenSequence,
    trajectory_sequence,
)


class FidelityError(HermesError):
    """A rollout cannot be trained on as it is (not the sampler's exact tokens, missing or
    malformed logprobs): a bug upstream, never something to skip silently."""


@attrs.frozen(kw_only=True)
class Sample:
    """One rollout: ``ids``, ``mask`` and ``logprobs`` aligned per token (``0.0`` where
    ``mask`` is 0), the sampling ``temperature`` and the ``reward``."""

    id: str
    reward: float | None
    ids: tuple[int, ...]
    mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    temperature: float


def _checked(sample: Sample) -> Sample:
    if not len(sample.ids) == len(sample.mask) == len(sample.logprobs):
        raise FidelityError(
            f"rollout {sample.id}: {len(sample.ids)} ids, {len(sample.mask)} mask entries, "
            f"{len(sample.logprobs)} logprobs"
        )
    if not sample.temperature > 0:
        raise FidelityError(f"rollout {sample.id} was sampled at temperature {sample.temperature}")
    for position, (on, logprob) in enumerate(zip(sample.mask, sample.logprobs, strict=True)):
        if on and not (math.isfinite(logprob) and logprob <= 0.0):
            raise FidelityError(f"rollout {sample.id}: logprob {logprob} at position {position}")
    return sample


def from_rollout(rollout: ScoredRollout, temperature: float) -> Sample:
    """A rollout of this process (a failed one comes back with ``reward=None``)."""
    reward = rollout.score.reward if rollout.score is not None else None
    trace = rollout.result.trace if rollout.result is not None else None
    if reward is None:
        return Sample(id=rollout.id, reward=None, ids=(), mask=(), logprobs=(), temperature=1.0)
    if trace is None:
        raise FidelityError(f"rollout {rollout.id} has no token trace (token mode is required)")
    if trace.source != "sampler":
        raise FidelityError(f"rollout {rollout.id} was retokenized; only sampler ids train")
    if trace.missing_logprobs:
        raise FidelityError(f"rollout {rollout.id} lacks {len(trace.missing_logprobs)} logprobs")
    _check_mode(rollout.id, trace.logprob_mode)
    return _checked(
        Sample(
            id=rollout.id,
            reward=reward,
            ids=trace.ids,
            mask=trace.mask,
            logprobs=trace.logprobs,
            temperature=temperature,
        )
    )


def _check_mode(rollout_id: str, mode: object) -> None:
    if mode not in (None, "sampled"):
        raise FidelityError(
            f"rollout {rollout_id} has {mode} logprobs; the trainer needs the sampled "
            "distribution's"
        )


def _temperature(sequence: TokenSequence, where: str) -> float:
    value = sequence.temperature
    if value is None:
        raise FidelityError(f"{where} does not say which temperature it was sampled at")
    return value


def _sample(sequence: TokenSequence, where: str) -> Sample:
    """``sequence`` as a sample (``0.0`` for the logprob where the mask is 0)."""
    return _checked(
        Sample(
            id=sequence.id,
            reward=sequence.reward,
            ids=sequence.ids,
            mask=sequence.mask,
            logprobs=tuple(
                lp if lp is not None else (math.nan if on else 0.0)
                for lp, on in zip(sequence.logprobs, sequence.mask, strict=False)
            ),
            temperature=_temperature(sequence, where),
        )
    )


def from_atropos_group(value: Mapping[str, Any], where: str) -> list[Sample]:
    """The sequences of one ``run-api`` group (``where`` names it in errors)."""
    group = AtroposGroup.from_json(value, where)
    if group.token_source != "sampler":
        raise FidelityError(
            f"{where} is not sampler-exact (token_source {group.token_source!r}); "
            "serve the environment with a token server (phase 2)"
        )
    for mode in group.logprob_modes:
        _check_mode(where, mode)
    logprobs = group.inference_logprobs or []
    if not len(group.tokens) == len(group.masks) == len(logprobs) == len(group.scores):
        raise FidelityError(f"{where}: tokens, masks, inference_logprobs, scores differ in count")
    for index, (ids, mask) in enumerate(zip(group.tokens, group.masks, strict=True)):
        if any(m != ATROPOS_MASKED and m != i for m, i in zip(mask, ids, strict=False)):
            raise FidelityError(f"{where} sequence {index}: a mask entry is not its token")
    return [_sample(sequence, where) for sequence in group.sequences(where)]


def from_trajectory(record: Mapping[str, Any]) -> Sample:
    """A batch runner ``trajectories.jsonl`` record (token mode)."""
    rollout_id = str(record.get("id"))
    where = f"trajectory {rollout_id}"
    sequence = trajectory_sequence(record, where)
    if sequence is None or sequence.token_source != "sampler":
        source = None if sequence is None else sequence.token_source
        raise FidelityError(
            f"{where} has token_source {source!r}; only token-mode runs (the sampler's own ids "
            "and logprobs) train"
        )
    _check_mode(rollout_id, sequence.logprob_mode)
    if (sequence.sampling or {}).get("missing_logprobs"):
        raise FidelityError(f"{where} lacks logprobs the engine did not return")
    return _sample(sequence, where)


def group_temperature(samples: Sequence[Sample]) -> float:
    """The one temperature of a group's scored samples."""
    temperatures = {s.temperature for s in samples}
    if len(temperatures) != 1:
        raise FidelityError(f"one group sampled at several temperatures: {sorted(temperatures)}")
    return temperatures.pop()
