"""The batch runner's trajectory record (one JSON object per line of ``trajectories.jsonl``,
``failed.jsonl`` and ``filtered.jsonl``): its format version and its token fields.

The whole record is described in :mod:`hermes_rollouts.trajectory_record`, its writer. The
token fields are written by :func:`token_fields` and read back by :func:`trajectory_sequence`:
``tokens``, ``masks`` (1 = sampled by the policy), ``logprobs`` (``null`` where the engine gave
none), ``token_source``, ``logprob_mode``, with ``sampling`` (the temperature and the positions
without a logprob) and ``reward``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hermes_protocols.formats.token_sequence import TokenSequence
from hermes_protocols.formats.versions import checked_version
from hermes_protocols.json_types import JSONObject
from hermes_protocols.tokens import TokenTrace

#: the record key holding the format version (absent in records written before it: version 1)
FORMAT_KEY = "format_version"
#: the version every writer writes and every reader accepts
TRAJECTORY_FORMAT = 1


def token_fields(trace: TokenTrace) -> JSONObject:
    """The record fields of a token trace (strict JSON: a non-finite logprob is ``null``)."""
    return {
        "tokens": list(trace.ids),
        "masks": list(trace.mask),
        "logprobs": [v if math.isfinite(v) else None for v in trace.logprobs],
        "token_source": trace.source,
        "logprob_mode": trace.logprob_mode,
    }


def check_trajectory_version(record: Mapping[str, Any], where: str) -> None:
    """:class:`~hermes_protocols.formats.FormatVersionError` unless ``record`` is of the
    version this code reads."""
    checked_version(
        record.get(FORMAT_KEY), kind="trajectory record", current=TRAJECTORY_FORMAT, where=where
    )


def trajectory_sequence(record: Mapping[str, Any], where: str) -> TokenSequence | None:
    """The token view of one record (``None``: a text-mode record without tokens)."""
    check_trajectory_version(record, where)
    tokens = record.get("tokens")
    if tokens is None:
        return None
    reward = record.get("reward")
    sampling = record.get("sampling")
    return TokenSequence(
        id=str(record.get("id")),
        reward=None if reward is None else float(reward),
        ids=tuple(int(i) for i in tokens),
        mask=tuple(int(m) for m in record.get("masks") or ()),
        logprobs=tuple(None if v is None else float(v) for v in record.get("logprobs") or ()),
        token_source=record.get("token_source"),
        logprob_mode=record.get("logprob_mode"),
        sampling=dict(sampling) if isinstance(sampling, Mapping) else None,
    )
