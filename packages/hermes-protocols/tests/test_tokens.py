from __future__ import annotations

import pytest
from hermes_protocols import Generation, TokenTrace
from hypothesis import given
from hypothesis import strategies as st

ids = st.lists(st.integers(min_value=0, max_value=200_000), max_size=20)


@given(st.lists(st.tuples(st.booleans(), ids), max_size=10))
def test_appending_keeps_alignment(segments: list[tuple[bool, list[int]]]) -> None:
    trace = TokenTrace()
    expected_ids: list[int] = []
    expected_mask: list[int] = []
    for trainable, segment in segments:
        if trainable:
            trace = trace.append_generated(segment, [-0.5] * len(segment))
        else:
            trace = trace.append_context(segment)
        expected_ids += segment
        expected_mask += [int(trainable)] * len(segment)
    assert list(trace.ids) == expected_ids
    assert list(trace.mask) == expected_mask
    assert len(trace.logprobs) == len(trace.ids)
    assert trace.num_trainable == sum(expected_mask)
    assert all(lp == 0.0 for lp, m in zip(trace.logprobs, trace.mask, strict=True) if m == 0)


def test_misaligned_trace_rejected() -> None:
    with pytest.raises(ValueError, match="misaligned"):
        TokenTrace(ids=(1, 2), mask=(1,), logprobs=(0.0, 0.0))


def test_generated_needs_one_logprob_per_id() -> None:
    with pytest.raises(ValueError, match="logprobs"):
        TokenTrace().append_generated([1, 2], [-1.0])
    with pytest.raises(ValueError, match="logprobs"):
        Generation(ids=(1, 2), logprobs=(-1.0,), finish_reason="stop")
