"""The default model's conversion: the shipped Q4_1 SmolLM2 to Q8_0, once, into a cache.

Runs the real conversion from an empty cache (two processes at once, as two first uses
would), then checks the cache hit, the tensor types and that every converted weight equals
the Q4_1 source's within Q8_0's own rounding.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import anyio
import gguf
import numpy as np
import pytest
from hermes_loop.embedded import (
    EmbeddedTokenBackend,
    converted_model,
    default_model_path,
    shipped_model_path,
)
from hermes_protocols import ConfigError

pytestmark = pytest.mark.slow

_CONVERT = (
    "import sys; from pathlib import Path; "
    "from hermes_loop.embedded import default_model_path; "
    "print(default_model_path(Path(sys.argv[1])))"
)


def _tensors(path: Path) -> dict[str, gguf.ReaderTensor]:
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def test_two_first_uses_convert_into_an_empty_cache_and_later_uses_hit_it(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "models"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONVERT, str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    (first,), (second,) = (out.split() for out, _ in outputs)
    assert first == second
    converted = Path(first)
    assert converted.parent.parent == cache
    assert "converting SmolLM2-135M-Instruct.Q4_1.gguf to Q8_0 once" in outputs[0][1]
    assert [p.name for p in converted.parent.iterdir()] == [converted.name]  # no temp left

    stamp = converted.stat().st_mtime_ns
    assert default_model_path(cache) == converted
    assert converted.stat().st_mtime_ns == stamp  # a hit: nothing rewritten

    source, target = _tensors(shipped_model_path()), _tensors(converted)
    assert source.keys() == target.keys()
    n_converted = 0
    for name, tensor in source.items():
        out = target[name]
        if tensor.tensor_type != gguf.GGMLQuantizationType.Q4_1:
            assert out.tensor_type == tensor.tensor_type
            assert np.array_equal(out.data, tensor.data)
            continue
        n_converted += 1
        assert out.tensor_type == gguf.GGMLQuantizationType.Q8_0
        want = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(-1, 32)
        got = gguf.quants.dequantize(out.data, out.tensor_type).reshape(-1, 32)
        step = out.data.reshape(-1, 34)[:, :2].copy().view(np.float16).astype(np.float32)
        # Q8_0 rounds each value to its block's step, with the step itself rounded to f16
        assert np.all(np.abs(got - want) <= 0.57 * step + 1e-12), name
    assert n_converted == 210
    reader = gguf.GGUFReader(converted)
    file_type = reader.fields["general.file_type"].contents()
    assert file_type == gguf.LlamaFileType.MOSTLY_Q8_0


def test_an_unwritable_cache_is_a_one_line_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError) as caught:
        converted_model(shipped_model_path(), blocker / "models")
    message = str(caught.value)
    assert "\n" not in message
    assert f"cannot write the converted default model into {blocker / 'models'}" in message
    assert "make that directory writable" in message
    assert str(shipped_model_path()) in message


def test_a_model_without_batched_kernels_is_noted_once_and_used_as_given(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def load(model: Path | None) -> Path:
        backend = await EmbeddedTokenBackend.open(model, n_ctx=64)
        async with backend:
            return backend.runtime.path

    with caplog.at_level(logging.WARNING, logger="hermes_loop.embedded"):
        assert anyio.run(load, shipped_model_path()) == shipped_model_path()
    notes = [r.getMessage() for r in caplog.records]
    assert notes == [
        "SmolLM2-135M-Instruct.Q4_1.gguf: Q4_1 weights have no batched CPU kernel in llama.cpp "
        "(covered: F32/BF16/F16/Q8_0/Q4_0/Q5_0/IQ4_NL); concurrent rollouts and prompts run "
        "slower than on a Q8_0 or F16 copy"
    ]
    default = default_model_path()  # converted (and logged) before the capture is cleared
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hermes_loop.embedded"):
        assert anyio.run(load, None) == default
    assert caplog.records == []
