"""An Atropos ``ScoredDataGroup`` as hermes-rl writes and reads it (one group per line of
``atropos_env process`` JSONL, one group per ``run-api`` message).

Parallel lists, one entry per member: ``tokens``; ``masks`` (the token id where it trains,
:data:`ATROPOS_MASKED` where it does not); ``inference_logprobs`` (the sampler's logprob where it
trains, :data:`MASKED_LOGPROB` filler elsewhere; absent for re-tokenized groups); ``scores``;
``messages``. ``generation_params["sampling"]`` holds the sampling settings all members share,
``generation_params["sampling_by_member"]`` each member's own; ``group_overrides`` names the
``environment``, ``item_id``, ``token_source``, ``logprob_modes`` and the format version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hermes_protocols.formats.token_sequence import TokenSequence
from hermes_protocols.formats.trajectory_record import FORMAT_KEY
from hermes_protocols.formats.versions import checked_version
from hermes_protocols.json_types import JSONObject

#: the mask value of a token that does not train (atroposlib's convention)
ATROPOS_MASKED = -100
#: the ``inference_logprobs`` filler where the mask is :data:`ATROPOS_MASKED`
MASKED_LOGPROB = 1.0
#: the version every writer puts in ``group_overrides`` and every reader accepts
GROUP_FORMAT = 1


def atropos_mask(ids: Sequence[int], mask: Sequence[int]) -> list[int]:
    """A 0/1 loss mask in Atropos form: the id where it trains, :data:`ATROPOS_MASKED` else."""
    return [i if m else ATROPOS_MASKED for i, m in zip(ids, mask, strict=True)]


def atropos_logprobs(logprobs: Sequence[float], mask: Sequence[int]) -> list[float]:
    """Logprobs in Atropos form: :data:`MASKED_LOGPROB` where ``mask`` is 0."""
    return [lp if m else MASKED_LOGPROB for lp, m in zip(logprobs, mask, strict=True)]


def _lists(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _member(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else None


@attrs.frozen(kw_only=True)
class AtroposGroup:
    """One group; see the module doc. Build it with the keyword fields, read one with
    :meth:`from_json`, send or write it as :meth:`to_json`."""

    tokens: list[list[int]]
    masks: list[list[int]]
    scores: list[float]
    inference_logprobs: list[list[float]] | None = None
    messages: list[list[JSONObject]] | None = None
    generation_params: JSONObject = attrs.field(factory=dict)
    group_overrides: JSONObject = attrs.field(factory=dict)

    @classmethod
    def from_json(cls, value: Mapping[str, Any], where: str) -> AtroposGroup:
        """A group as parsed from JSON; ``where`` names it in errors
        (:class:`~hermes_protocols.formats.FormatVersionError` for another version)."""
        overrides = value.get("group_overrides") or {}
        checked_version(
            overrides.get(FORMAT_KEY), kind="Atropos group", current=GROUP_FORMAT, where=where
        )
        logprobs = value.get("inference_logprobs")
        messages = value.get("messages")
        return cls(
            tokens=_lists(value.get("tokens")),
            masks=_lists(value.get("masks")),
            scores=_lists(value.get("scores")),
            inference_logprobs=logprobs if isinstance(logprobs, list) else None,
            messages=messages if isinstance(messages, list) else None,
            generation_params=dict(value.get("generation_params") or {}),
            group_overrides=dict(overrides),
        )

    def to_json(self) -> JSONObject:
        """The ``ScoredDataGroup`` keys atroposlib expects, this format's version included."""
        return {
            "tokens": self.tokens,
            "masks": self.masks,
            "scores": self.scores,
            "advantages": None,
            "ref_logprobs": None,
            "messages": self.messages,
            "generation_params": self.generation_params,
            "inference_logprobs": self.inference_logprobs,
            "group_overrides": {**self.group_overrides, FORMAT_KEY: GROUP_FORMAT},
            "overrides": None,
            "images": None,
        }

    @property
    def token_source(self) -> str | None:
        """``"sampler"`` (phase 2) or ``"retokenized"`` (phase 1)."""
        source = self.group_overrides.get("token_source")
        if source is None:
            source = self.generation_params.get("token_source")
        return source if isinstance(source, str) else None

    @property
    def logprob_modes(self) -> list[str | None]:
        """The members' logprob modes (``None``: mixed within a member; a server that turned
        ``null`` into ``"None"`` is read back as ``None``)."""
        modes = _lists(self.group_overrides.get("logprob_modes"))
        return [m if isinstance(m, str) and m != "None" else None for m in modes]

    @property
    def item_id(self) -> str | None:
        value = self.group_overrides.get("item_id")
        return None if value is None else str(value)

    @property
    def environment(self) -> str | None:
        value = self.group_overrides.get("environment")
        return value if isinstance(value, str) else None

    def sampling(self, index: int) -> JSONObject | None:
        """Member ``index``'s sampling record over the settings all members share."""
        own = _member(_lists(self.generation_params.get("sampling_by_member")), index)
        shared = self.generation_params.get("sampling")
        if not isinstance(own, dict) and not isinstance(shared, dict):
            return None
        return {
            **(shared if isinstance(shared, dict) else {}),
            **(own if isinstance(own, dict) else {}),
        }

    def sequences(self, group_id: str) -> list[TokenSequence]:
        """The members as token sequences, ids ``<group_id>/<index>``."""
        modes = self.logprob_modes
        mode = modes[0] if len(modes) == 1 else None
        out = []
        for index, ids in enumerate(self.tokens):
            masks = _member(self.masks, index) or []
            mask = tuple(0 if m == ATROPOS_MASKED else 1 for m in masks)
            lps = _member(self.inference_logprobs or [], index)
            logprobs = (
                tuple(float(lp) if i < len(mask) and mask[i] else None for i, lp in enumerate(lps))
                if isinstance(lps, list)
                else tuple(None for _ in mask)
            )
            score = _member(self.scores, index)
            out.append(
                TokenSequence(
                    id=f"{group_id}/{index}",
                    reward=None if score is None else float(score),
                    ids=tuple(int(i) for i in ids),
                    mask=mask,
                    logprobs=logprobs,
                    token_source=self.token_source,
                    logprob_mode=mode,
                    sampling=self.sampling(index),
                )
            )
        return out
