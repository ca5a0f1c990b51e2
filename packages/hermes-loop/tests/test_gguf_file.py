"""``read_gguf_file`` reads what the ``gguf`` package wrote and what its reader reads: every
metadata value and every tensor's bytes, on files written here with ``gguf.GGUFWriter`` and on
the shipped SmolLM2 GGUF; a file that is not GGUF, an unsupported version or a cut file is a
one-line ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from hermes_loop.embedded import shipped_model_path
from hermes_loop.embedded.gguf_file import GGUFFile, read_gguf_file
from hermes_protocols import ConfigError
from hypothesis import given, settings
from hypothesis import strategies as st

_SCALAR_TYPES = [
    gguf.GGUFValueType.UINT8,
    gguf.GGUFValueType.INT8,
    gguf.GGUFValueType.UINT16,
    gguf.GGUFValueType.INT16,
    gguf.GGUFValueType.UINT32,
    gguf.GGUFValueType.INT32,
    gguf.GGUFValueType.UINT64,
    gguf.GGUFValueType.INT64,
]
_INTS = {kind: np.iinfo(kind.name.lower()) for kind in _SCALAR_TYPES}
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


def _same_as_the_gguf_reader(path: Path, ours: GGUFFile) -> None:
    theirs = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    assert dict(ours.metadata) == fields
    assert list(ours.metadata) == list(fields)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, reference in zip(ours.tensors, theirs.tensors, strict=True):
        assert mine.tensor_type == reference.tensor_type, mine.name
        assert mine.shape == tuple(int(n) for n in reference.shape), mine.name
        assert mine.data.shape[:-1] == reference.data.shape[:-1], mine.name
        assert mine.data.tobytes() == reference.data.tobytes(), mine.name


@st.composite
def _metadata(draw: st.DrawFn) -> list[tuple[str, Any, gguf.GGUFValueType, Any]]:
    """``(key, value, type, element type)`` of every kind a GGUF holds."""
    fields: list[tuple[str, Any, gguf.GGUFValueType, Any]] = []
    for index, kind in enumerate(draw(st.lists(st.sampled_from(_SCALAR_TYPES), max_size=6))):
        limits = _INTS[kind]
        value = draw(st.integers(int(limits.min), int(limits.max)))
        fields.append((f"int.{index}", value, kind, None))
    floats = st.floats(width=32, allow_nan=False)
    fields.append(("f32", draw(floats), gguf.GGUFValueType.FLOAT32, None))
    fields.append(("f64", draw(st.floats(allow_nan=False)), gguf.GGUFValueType.FLOAT64, None))
    fields.append(("flag", draw(st.booleans()), gguf.GGUFValueType.BOOL, None))
    fields.append(("name", draw(_TEXT), gguf.GGUFValueType.STRING, None))
    words = draw(st.lists(_TEXT, min_size=1, max_size=20))
    fields.append(("words", words, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING))
    numbers = draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=20))
    fields.append(("numbers", numbers, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32))
    flags = draw(st.lists(st.booleans(), min_size=1, max_size=8))
    fields.append(("flags", flags, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.BOOL))
    return fields


@settings(max_examples=25, deadline=None)
@given(
    fields=_metadata(),
    alignment=st.sampled_from([8, 32, 64]),
    rows=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_every_value_and_tensor_the_gguf_writer_writes_reads_back(
    tmp_path_factory: pytest.TempPathFactory,
    fields: list[tuple[str, Any, gguf.GGUFValueType, Any]],
    alignment: int,
    rows: int,
    seed: int,
) -> None:
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_custom_alignment(alignment)
    for key, value, kind, element in fields:
        writer.add_key_value(f"test.{key}", value, kind, sub_type=element)
    weights = np.random.default_rng(seed).standard_normal((rows, 64)).astype(np.float32)
    writer.add_tensor("f32.weight", weights)
    writer.add_tensor("f16.weight", weights.astype(np.float16))
    q8 = gguf.quants.quantize(weights, gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("q8.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    ours = read_gguf_file(path)

    for key, value, _kind, _element in fields:
        assert ours.metadata[f"test.{key}"] == value, key
    f32, f16, q8_read = ours.tensors
    assert f32.shape == (64, rows)
    np.testing.assert_array_equal(gguf.quants.dequantize(f32.data, f32.tensor_type), weights)
    expected = gguf.quants.dequantize(q8, gguf.GGMLQuantizationType.Q8_0)
    actual = gguf.quants.dequantize(q8_read.data, q8_read.tensor_type)
    np.testing.assert_array_equal(actual, expected)
    half = gguf.quants.dequantize(f16.data, f16.tensor_type)
    np.testing.assert_array_equal(half, weights.astype(np.float16).astype(np.float32))
    _same_as_the_gguf_reader(path, ours)


@pytest.mark.slow
def test_the_shipped_model_reads_as_the_gguf_package_reads_it() -> None:
    path = shipped_model_path()
    ours = read_gguf_file(path)
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152  # type: ignore[arg-type]
    _same_as_the_gguf_reader(path, ours)


def test_what_is_not_a_readable_gguf_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "c"] * 100)
    writer.add_tensor("w.weight", np.ones((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    whole = path.read_bytes()
    assert len(read_gguf_file(path).tensors) == 1
    cases = {
        "not a GGUF file": b"GGML" + whole[4:],
        "GGUF version 1 is not supported": whole[:4] + (1).to_bytes(4, "little") + whole[8:],
        "truncated GGUF": whole[:200],
        "runs past the end": whole[:-16],
        "cannot read the GGUF file": b"",
    }
    for says, content in cases.items():
        path.write_bytes(content)
        with pytest.raises(ConfigError, match=says) as raised:
            read_gguf_file(path)
        assert str(path) in str(raised.value)
        assert "\n" not in str(raised.value)
