"""Rollout records -> the report's data model: one compact row per rollout (what the list
filters and sorts on) and one detail object (what a rollout page shows).

A record is a batch-runner record (``trajectories.jsonl`` / ``failed.jsonl`` /
``filtered.jsonl``) or one member of an Atropos ``ScoredDataGroup`` flattened by
:mod:`hermes_report.sources`. Every field is optional: fields added later (``tools``,
``tool_stats``, ``toolsets_used``, ``system_prompt``, ``logprob_mode``, ``prefill_messages``) are
shown (or used) when present.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

STATUSES = ("kept", "failed", "filtered")


def status_of(record: Mapping[str, Any]) -> str:
    """``kept``, ``failed`` or ``filtered``: an explicit ``status`` wins, else the record's
    ``failure`` / ``filter_reason`` decide."""
    status = record.get("status")
    if status in STATUSES:
        return str(status)
    if record.get("failure"):
        return "failed"
    if record.get("filter_reason"):
        return "filtered"
    return "kept"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int_list(value: object) -> list[int] | None:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        return None
    return list(value)


def _item_field(record: Mapping[str, Any], name: str) -> str | None:
    """``name`` from the item's data, else the record's metadata (or its ``workspace``)."""
    item = record.get("item")
    metadata = record.get("metadata")
    workspace = metadata.get("workspace") if isinstance(metadata, Mapping) else None
    for data in (item.get("data") if isinstance(item, Mapping) else None, metadata, workspace):
        if isinstance(data, Mapping) and data.get(name) is not None:
            return str(data[name])
    return None


def demonstration_span(record: Mapping[str, Any]) -> tuple[int, int]:
    """``(start, end)`` of the prefilled demonstration in the record's messages: the
    ``prefill_messages`` messages right after the leading system message(s); empty when the
    record has none."""
    messages = record.get("messages") or []
    start = 0
    while start < len(messages) and _role(messages[start]) == "system":
        start += 1
    count = record.get("prefill_messages")
    return start, start + (count if isinstance(count, int) and count > 0 else 0)


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


def failures_recorded(record: Mapping[str, Any]) -> bool:
    """Whether the record says which tool calls failed (an Atropos group member does not)."""
    return "tool_stats" in record or "tool_errors" in record


def tool_stats(record: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """``(calls, failures)`` per tool for the calls the model made: the record's own
    ``tool_stats`` when it has them, else the tool calls of the assistant messages after the
    demonstration and the record's ``tool_errors``. A demonstration's calls never count."""
    recorded = record.get("tool_stats")
    if isinstance(recorded, Mapping):
        return {
            str(name): (int(entry.get("calls") or 0), int(entry.get("failures") or 0))
            for name, entry in recorded.items()
            if isinstance(entry, Mapping)
        }
    counts: dict[str, list[int]] = {}
    messages = record.get("messages") or []
    for message in messages[demonstration_span(record)[1] :]:
        if _role(message) != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            counts.setdefault(str(name) if name else "?", [0, 0])[0] += 1
    for error in record.get("tool_errors") or []:
        if isinstance(error, Mapping):
            counts.setdefault(str(error.get("tool") or "?"), [0, 0])[1] += 1
    return {name: (calls, failures) for name, (calls, failures) in counts.items()}


@attrs.frozen(slots=True)
class TokenTrack:
    """A rollout's token sequence as the trainer gets it (all lists aligned)."""

    ids: list[int]
    mask: list[int]  # 1 = trainable (sampled), 0 = prompt / bridge
    logprobs: list[float | None]  # None where masked or where the sampler gave none
    source: str | None  # "sampler", "retokenized", or None when unknown
    drift_positions: list[int]

    @property
    def trainable(self) -> int:
        return sum(self.mask)


def token_track(record: Mapping[str, Any]) -> TokenTrack | None:
    """The record's tokens, or ``None`` when it carries none (phase 1, failed rollouts)."""
    ids = _int_list(record.get("tokens"))
    if ids is None:
        return None
    mask = _int_list(record.get("masks")) or [0] * len(ids)
    if len(mask) != len(ids):
        mask = (mask + [0] * len(ids))[: len(ids)]
    mask = [1 if m == 1 else 0 for m in mask]
    raw = record.get("logprobs")
    lps = raw if isinstance(raw, list) and len(raw) == len(ids) else [None] * len(ids)
    logprobs = [_number(lp) if m else None for lp, m in zip(lps, mask, strict=True)]
    drift = record.get("drift")
    positions = drift.get("positions") if isinstance(drift, Mapping) else None
    source = record.get("token_source")
    return TokenTrack(
        ids=ids,
        mask=mask,
        logprobs=logprobs,
        source=str(source) if source else None,
        drift_positions=[p for p in _int_list(positions) or [] if 0 <= p < len(ids)],
    )


def drift_count(record: Mapping[str, Any]) -> int | None:
    """Drift mismatches of the record's re-render check, ``None`` when it was not checked."""
    drift = record.get("drift")
    if not isinstance(drift, Mapping):
        return None
    value = drift.get("mismatches")
    return value if isinstance(value, int) else None


def reason_of(record: Mapping[str, Any]) -> str | None:
    """Why a rollout was not kept: the filter reason or ``kind:phase`` of the failure."""
    failure = record.get("failure")
    if isinstance(failure, Mapping):
        return f"{failure.get('kind')}:{failure.get('phase')}"
    reason = record.get("filter_reason")
    return str(reason) if reason else None


def row(index: int, record: Mapping[str, Any], track: TokenTrack | None) -> dict[str, Any]:
    """The compact list entry of one rollout (short keys: this is repeated thousands of times)."""
    turns = record.get("turns")
    tools = tool_stats(record)
    return {
        "i": index,
        "id": str(record.get("id", index)),
        "st": status_of(record),
        "why": reason_of(record),
        "r": _number(record.get("reward")),
        "stop": record.get("stop_reason"),
        "fam": _item_field(record, "family"),
        "dif": _item_field(record, "difficulty"),
        "turns": turns if isinstance(turns, int) else None,
        "tc": sum(calls for calls, _ in tools.values()),
        "te": sum(f for _, f in tools.values()) if failures_recorded(record) else None,
        "ntok": len(track.ids) if track else None,
        "gen": track.trainable if track else None,
        "drift": drift_count(record),
        "src": track.source if track else None,
    }


_DETAIL_FIELDS = (
    "env",
    "item",
    "model",
    "metrics",
    "score_details",
    "failure",
    "filter_reason",
    "error",
    "messages",
    "tool_errors",
    "tools",
    "tool_stats",
    "toolsets_used",
    "system_prompt",
    "logprob_mode",
    "drift",
    "timings",
    "metadata",
    "conversations_error",
)


def detail(
    record: Mapping[str, Any], track: TokenTrack | None, special_ids: frozenset[int]
) -> dict[str, Any]:
    """What one rollout's page shows: token ids, the mask as a ``0``/``1`` string, and the
    logprobs of the trainable positions only (in order, rounded; ``None`` where missing); the
    demonstration's message span (``demo``); each tool error with how its turn ended
    (``turn_end``)."""
    out: dict[str, Any] = {k: record[k] for k in _DETAIL_FIELDS if record.get(k) is not None}
    out["demo"] = list(demonstration_span(record))
    if out.get("tool_errors"):
        ends = turn_ends(record)
        out["tool_errors"] = [
            {**e, "turn_end": ends.get(e.get("turn"))} if isinstance(e, Mapping) else e
            for e in out["tool_errors"]
        ]
    if track is not None:
        out["tok"] = {
            "ids": track.ids,
            "mask": "".join(str(m) for m in track.mask),
            "lp": [
                None if lp is None else round(lp, 3)
                for lp, m in zip(track.logprobs, track.mask, strict=True)
                if m
            ],
            "src": track.source,
            "drift": track.drift_positions,
            "ends": end_positions(track, special_ids),
        }
    return out


def turn_ends(record: Mapping[str, Any]) -> dict[object, str]:
    """How each turn's generation ended (``stop``: the model sampled an end token;
    ``length``: it hit the token budget), from the record's per-turn timings."""
    timings = record.get("timings")
    turns = timings.get("turns") if isinstance(timings, Mapping) else None
    return {
        t["turn"]: str(t["finish_reason"])
        for t in turns or []
        if isinstance(t, Mapping) and isinstance(t.get("turn"), int) and t.get("finish_reason")
    }


def end_positions(track: TokenTrack, special_ids: frozenset[int]) -> list[int]:
    """Positions that end a sampled turn (the last token of each trainable run) and every
    special token of the tokenizer."""
    last = len(track.mask) - 1
    return [
        i
        for i, m in enumerate(track.mask)
        if (m and (i == last or not track.mask[i + 1])) or track.ids[i] in special_ids
    ]


def to_json(value: object) -> str:
    """Compact JSON safe to embed in an HTML ``<script type="application/json">`` element:
    ``<``, ``>``, ``&`` and the JS line separators are escaped, so no record text can close
    the element or start markup."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def token_ids(tracks: Sequence[TokenTrack | None]) -> set[int]:
    """Every token id the report shows (the vocabulary slice it embeds)."""
    seen: set[int] = set()
    for track in tracks:
        if track is not None:
            seen.update(track.ids)
    return seen
