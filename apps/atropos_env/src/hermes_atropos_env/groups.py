"""Scored rollouts -> one atroposlib ``ScoredDataGroup`` per item.

Rules: failed rollouts (infrastructure or otherwise unscored) are never sent as zero-reward data;
overlong sequences are dropped or truncated (mask and logprobs cut with them); only complete
groups (``group_size`` usable rollouts) are sent, because Atropos would otherwise merge partial
groups of different items into one advantage group. Phase-2 groups carry the sampler's ids,
masks and ``inference_logprobs`` in :class:`hermes_protocols.formats.AtroposGroup`'s form;
phase-1 groups carry re-tokenized ids, no logprobs, and say so in
``group_overrides["token_source"]`` (and an empty ``logprob_modes``).
``generation_params["sampling"]`` holds the sampling settings every member shares (temperature,
top-p, ...; a trainer reads the temperature there), ``sampling_by_member`` each member's own
record (its seed, logprob mode and positions without a logprob).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from hermes_protocols import AgentResult, FailureKind, ScoredRollout, TokenTrace
from hermes_protocols.convert import messages_to_openai
from hermes_protocols.formats import AtroposGroup, atropos_logprobs, atropos_mask

from hermes_atropos_env.atroposlib_import import ScoredDataGroup
from hermes_atropos_env.config import OverlongPolicy

Retokenize = Callable[[AgentResult], TokenTrace]


class Exclusion(enum.StrEnum):
    """Why a rollout was left out of its group."""

    INFRASTRUCTURE = "infrastructure_failure"
    UNSCORED = "unscored_failure"
    NO_TRACE = "no_token_trace"
    NOT_SAMPLER_EXACT = "not_sampler_exact"
    OVERLONG = "overlong_dropped"
    NOTHING_TRAINABLE = "nothing_trainable"


@attrs.frozen(slots=True)
class GroupPolicy:
    """How a group is built: sequence budget, overlong policy and phase."""

    group_size: int
    max_token_length: int
    overlong_policy: OverlongPolicy = "drop"
    token_mode: bool = True


@attrs.frozen(slots=True)
class GroupOutcome:
    """The group to send (``None`` when incomplete) and what happened to each rollout."""

    group: ScoredDataGroup | None
    usable: tuple[ScoredRollout, ...]
    excluded: tuple[tuple[ScoredRollout, Exclusion], ...]
    truncated: int

    @property
    def exclusion_counts(self) -> Counter[str]:
        return Counter(str(reason) for _, reason in self.excluded)


def truncate_trace(trace: TokenTrace, limit: int) -> TokenTrace:
    """The first ``limit`` positions of a trace, ids, mask and logprobs cut together."""
    return TokenTrace(
        ids=trace.ids[:limit],
        mask=trace.mask[:limit],
        logprobs=trace.logprobs[:limit],
        source=trace.source,
        missing_logprobs=[p for p in trace.missing_logprobs if p < limit],
        logprob_mode=trace.logprob_mode,
    )


def _trace_for(
    rollout: ScoredRollout, policy: GroupPolicy, retokenize: Retokenize | None
) -> TokenTrace | Exclusion:
    result = rollout.result
    assert result is not None
    trace = result.trace
    if policy.token_mode:
        if trace is None:
            return Exclusion.NO_TRACE
        if trace.source != "sampler":
            return Exclusion.NOT_SAMPLER_EXACT
        return trace
    if trace is not None and trace.source == "retokenized":
        return trace
    if retokenize is None:
        return Exclusion.NO_TRACE
    return retokenize(result)


def _exclusion(rollout: ScoredRollout) -> Exclusion | None:
    if rollout.failure is not None:
        if rollout.failure.kind is FailureKind.INFRASTRUCTURE:
            return Exclusion.INFRASTRUCTURE
        return Exclusion.UNSCORED
    if rollout.score is None or rollout.result is None:
        return Exclusion.UNSCORED
    if rollout.score.failure is FailureKind.INFRASTRUCTURE:
        return Exclusion.INFRASTRUCTURE
    return None


def build_group(
    rollouts: Sequence[ScoredRollout],
    policy: GroupPolicy,
    *,
    retokenize: Retokenize | None = None,
    generation_params: dict[str, Any] | None = None,
    group_overrides: dict[str, Any] | None = None,
) -> GroupOutcome:
    """Build the ScoredDataGroup of one item's rollouts (see the module docstring);
    ``group_overrides`` are added to the group's own."""
    usable: list[tuple[ScoredRollout, TokenTrace]] = []
    excluded: list[tuple[ScoredRollout, Exclusion]] = []
    truncated = 0
    for rollout in rollouts:
        reason = _exclusion(rollout)
        if reason is not None:
            excluded.append((rollout, reason))
            continue
        traced = _trace_for(rollout, policy, retokenize)
        if isinstance(traced, Exclusion):
            excluded.append((rollout, traced))
            continue
        if len(traced) >= policy.max_token_length:
            if policy.overlong_policy == "drop":
                excluded.append((rollout, Exclusion.OVERLONG))
                continue
            traced = truncate_trace(traced, policy.max_token_length - 1)
            truncated += 1
        if traced.num_trainable == 0:
            excluded.append((rollout, Exclusion.NOTHING_TRAINABLE))
            continue
        usable.append((rollout, traced))
    group = (
        _assemble(usable, policy, generation_params, group_overrides or {})
        if len(usable) == policy.group_size
        else None
    )
    return GroupOutcome(
        group=group,
        usable=tuple(r for r, _ in usable),
        excluded=tuple(excluded),
        truncated=truncated,
    )


def _mask_known(trace: TokenTrace) -> list[int]:
    """The loss mask without the positions whose logprob the engine did not return (a
    behaviour logprob is needed to train a token; NaN would also break the JSON)."""
    mask = list(trace.mask)
    for position in trace.missing_logprobs:
        mask[position] = 0
    return mask


def _sampling(usable: Sequence[tuple[ScoredRollout, TokenTrace]]) -> tuple[Any, list[Any]]:
    """The members' sampling records: the settings every member shares (``None`` when a member
    has none) and each member's own record (seed, logprob mode, missing positions)."""
    records = [r.result.metadata.get("sampling") if r.result else None for r, _ in usable]
    found = [record for record in records if isinstance(record, dict)]
    if len(found) < len(records):
        return None, records
    first, *others = found
    shared = {k: v for k, v in first.items() if all(k in o and o[k] == v for o in others)}
    return shared, records


def _logprob_modes(usable: Sequence[tuple[ScoredRollout, TokenTrace]], token_mode: bool) -> Any:
    """The members' logprob modes (``None``: mixed within a trace); none in phase 1."""
    if not token_mode:
        return []
    return sorted({t.logprob_mode for _, t in usable}, key=str)


def _assemble(
    usable: Sequence[tuple[ScoredRollout, TokenTrace]],
    policy: GroupPolicy,
    generation_params: dict[str, Any] | None,
    group_overrides: dict[str, Any],
) -> ScoredDataGroup:
    source = "sampler" if policy.token_mode else "retokenized"
    first = usable[0][0]
    shared, by_member = _sampling(usable)
    group = AtroposGroup(
        tokens=[list(trace.ids) for _, trace in usable],
        masks=[atropos_mask(trace.ids, _mask_known(trace)) for _, trace in usable],
        scores=[float(r.score.reward) if r.score else 0.0 for r, _ in usable],
        messages=[messages_to_openai(r.result.messages) if r.result else [] for r, _ in usable],
        generation_params={
            **(generation_params or {}),
            "token_source": source,
            "sampling": shared,
            "sampling_by_member": by_member,
        },
        inference_logprobs=(
            [atropos_logprobs(t.logprobs, _mask_known(t)) for _, t in usable]
            if policy.token_mode
            else None
        ),
        group_overrides={
            "token_source": source,
            "logprob_modes": _logprob_modes(usable, policy.token_mode),
            "environment": first.env,
            "item_id": first.item.id,
            **group_overrides,
        },
    )
    return ScoredDataGroup(**group.to_json())
