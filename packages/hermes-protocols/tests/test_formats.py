"""The record formats on their own: an Atropos group survives JSON, its masks and logprobs
decode to the token view, and a version check refuses what it does not know."""

from __future__ import annotations

import json

import hypothesis.strategies as st
import pytest
from hermes_protocols.formats import (
    ATROPOS_MASKED,
    FORMAT_KEY,
    MASKED_LOGPROB,
    AtroposGroup,
    FormatVersionError,
    atropos_logprobs,
    atropos_mask,
    trajectory_sequence,
)
from hypothesis import given


@st.composite
def members(draw: st.DrawFn) -> tuple[list[int], list[int], list[float]]:
    ids = draw(st.lists(st.integers(0, 50_000), min_size=1, max_size=12))
    mask = draw(st.lists(st.integers(0, 1), min_size=len(ids), max_size=len(ids)))
    logprobs = draw(st.lists(st.floats(-30, 0), min_size=len(ids), max_size=len(ids)))
    return ids, mask, logprobs


@given(group=st.lists(members(), min_size=1, max_size=4))
def test_a_group_through_json_decodes_to_its_members(
    group: list[tuple[list[int], list[int], list[float]]],
) -> None:
    written = AtroposGroup(
        tokens=[ids for ids, _, _ in group],
        masks=[atropos_mask(ids, mask) for ids, mask, _ in group],
        scores=[float(i) for i in range(len(group))],
        inference_logprobs=[atropos_logprobs(lps, mask) for _, mask, lps in group],
        generation_params={"sampling": {"temperature": 0.7}},
        group_overrides={"token_source": "sampler", "logprob_modes": ["sampled"]},
    )
    read = AtroposGroup.from_json(json.loads(json.dumps(written.to_json())), "line 1")
    for index, ((ids, mask, lps), sequence) in enumerate(
        zip(group, read.sequences("g"), strict=True)
    ):
        assert sequence.id == f"g/{index}"
        assert (list(sequence.ids), list(sequence.mask)) == (ids, mask)
        assert list(sequence.logprobs) == [
            lp if m else None for lp, m in zip(lps, mask, strict=True)
        ]
        assert (sequence.reward, sequence.temperature) == (float(index), 0.7)
        assert (sequence.token_source, sequence.logprob_mode) == ("sampler", "sampled")
    wire = zip(read.tokens, read.masks, read.inference_logprobs or [], strict=True)
    for wire_ids, wire_masks, wire_lps in wire:
        for token, entry, logprob in zip(wire_ids, wire_masks, wire_lps, strict=True):
            assert entry in (token, ATROPOS_MASKED)
            assert entry != ATROPOS_MASKED or logprob == MASKED_LOGPROB


def test_a_members_own_sampling_record_overrides_the_shared_one() -> None:
    group = AtroposGroup(
        tokens=[[1], [2]],
        masks=[[1], [2]],
        scores=[0.0, 1.0],
        generation_params={
            "sampling": {"temperature": 1.0},
            "sampling_by_member": [{"seed": 3}, {"seed": 4, "temperature": 0.5}],
        },
    )
    first, second = group.sequences("g")
    assert (first.sampling, second.sampling) == (
        {"temperature": 1.0, "seed": 3},
        {"temperature": 0.5, "seed": 4},
    )


@pytest.mark.parametrize("version", [0, 2, "1", 1.5])
def test_another_version_is_refused_naming_both(version: object) -> None:
    with pytest.raises(
        FormatVersionError,
        match=rf"line 3 is a trajectory record of format version {version!r}; this hermes-rl "
        "reads version 1",
    ):
        trajectory_sequence({FORMAT_KEY: version, "tokens": [1]}, "line 3")
    with pytest.raises(FormatVersionError, match="Atropos group of format version"):
        AtroposGroup.from_json({"group_overrides": {FORMAT_KEY: version}}, "group 1")


def test_a_text_record_has_no_token_view_and_a_token_record_has_one() -> None:
    assert trajectory_sequence({"id": "a", FORMAT_KEY: 1}, "line 1") is None
    sequence = trajectory_sequence(
        {"id": "a", "tokens": [5, 6], "masks": [0, 1], "logprobs": [None, -0.5], "reward": 1},
        "line 1",
    )
    assert sequence is not None
    assert (sequence.ids, sequence.mask, sequence.logprobs) == ((5, 6), (0, 1), (None, -0.5))
    assert (sequence.reward, sequence.temperature) == (1.0, None)


def test_logprob_modes_read_null_and_its_string_form_as_mixed() -> None:
    group = AtroposGroup(
        tokens=[], masks=[], scores=[], group_overrides={"logprob_modes": [None, "None", "raw"]}
    )
    assert group.logprob_modes == [None, None, "raw"]
