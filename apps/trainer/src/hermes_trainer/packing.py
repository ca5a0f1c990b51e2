"""Packing a group's sequences into one row: the shared prompt once, then each sequence's rest.

The rollouts of a group start with the same prompt (system prompt, demonstration, task), often
most of their tokens. :func:`pack` puts that prefix once at the head of the row and each
sequence's own tokens after it (see :mod:`hermes_trainer.llama` for the attention rule), so a
group of ``G`` costs ``prefix + G * rest`` tokens instead of ``G * (prefix + rest)``. The
prefix stops before any sequence's first trainable token, so every trainable token (with its
own advantage and sampler logprob) sits in its own sequence's segment.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt


@attrs.frozen(kw_only=True)
class TrainSequence:
    """One rollout's exact token trace and its advantage.

    ``ids``, ``mask`` and ``sampler_logprobs`` are aligned per token (``mask = 1``: sampled by
    the policy; the logprob is the sampler's, ``0.0`` elsewhere)."""

    ids: tuple[int, ...]
    mask: tuple[int, ...]
    sampler_logprobs: tuple[float, ...]
    advantage: float

    @property
    def trainable(self) -> int:
        return sum(self.mask[1:])


Row = dict[str, npt.NDArray[np.generic]]


def shared_prefix(sequences: Sequence[TrainSequence]) -> int:
    """How many leading positions the row shares: the ids every sequence starts with, cut
    before the first trainable token, minus one (the last shared position's next token may
    differ between sequences)."""
    first = sequences[0].ids
    common = len(first)
    for sequence in sequences:
        ids = sequence.ids
        n = 0
        for a, b in zip(first, ids, strict=False):
            if a != b:
                break
            n += 1
        common = min(common, n)
        if 1 in sequence.mask:
            common = min(common, sequence.mask.index(1))
    return max(0, common - 1)


def pack(sequences: Sequence[TrainSequence], *, pad_to: int) -> Row:
    """One row (``ids``, ``targets``, ``positions``, ``segments``, ``mask``,
    ``sampler_logprobs``, ``advantages``) padded with inert tokens to a multiple of
    ``pad_to``. Each padding token sees only itself, so no attention row is empty."""
    if not sequences:
        raise ValueError("nothing to pack")
    prefix = shared_prefix(sequences)
    head = sequences[0]
    parts: dict[str, list[npt.NDArray[np.generic]]] = {
        "ids": [np.asarray(head.ids[:prefix], np.int32)],
        "targets": [np.asarray(head.ids[1 : prefix + 1], np.int32)],
        "positions": [np.arange(prefix, dtype=np.int32)],
        "segments": [np.zeros(prefix, np.int32)],
        "mask": [np.zeros(prefix, np.float32)],
        "sampler_logprobs": [np.zeros(prefix, np.float32)],
        "advantages": [np.zeros(prefix, np.float32)],
    }
    for segment, sequence in enumerate(sequences, start=1):
        n = len(sequence.ids) - 1 - prefix
        mask = np.asarray(sequence.mask[prefix + 1 :], np.float32)
        parts["ids"].append(np.asarray(sequence.ids[prefix:-1], np.int32))
        parts["targets"].append(np.asarray(sequence.ids[prefix + 1 :], np.int32))
        parts["positions"].append(np.arange(prefix, prefix + n, dtype=np.int32))
        parts["segments"].append(np.full(n, segment, np.int32))
        parts["mask"].append(mask)
        parts["sampler_logprobs"].append(
            np.asarray(sequence.sampler_logprobs[prefix + 1 :], np.float32)
        )
        parts["advantages"].append(mask * np.float32(sequence.advantage))
    row = {name: np.concatenate(values) for name, values in parts.items()}
    padding = -len(row["ids"]) % pad_to
    fill = {"segments": -1}
    return {
        name: np.concatenate([values, np.full(padding, fill.get(name, 0), values.dtype)])
        for name, values in row.items()
    }
