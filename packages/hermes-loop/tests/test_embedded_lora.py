"""Hot-loading a GGUF LoRA adapter into the real embedded SmolLM2 model.

The adapters are written here with ``gguf`` in llama.cpp's adapter format (``lora_a`` ne
``[in, rank]``, ``lora_b`` ne ``[rank, out]``) for every attention and MLP projection.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import gguf
import numpy as np
import pytest
from hermes_loop.embedded import EmbeddedTokenBackend, GGUFTokenizer, default_model_path
from hermes_protocols import ConfigError, SamplingParams

PROMPT = "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\nA banana is a fruit."
KINDS = {"attn_q": (576, 576), "attn_v": (192, 576), "ffn_down": (576, 1536)}


def _write_adapter(path: Path, b_std: float, *, rank: int = 4) -> Path:
    rng = np.random.default_rng(7)
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(rank))
    for layer in range(30):
        for kind, (out_dim, in_dim) in KINDS.items():
            a = rng.normal(0.0, in_dim**-0.5, size=(rank, in_dim)).astype(np.float32)
            b = rng.normal(0.0, b_std, size=(out_dim, rank)).astype(np.float32)
            writer.add_tensor(f"blk.{layer}.{kind}.weight.lora_a", a)
            writer.add_tensor(f"blk.{layer}.{kind}.weight.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.slow
def test_an_adapter_changes_the_logprobs_and_unloading_restores_them(tmp_path: Path) -> None:
    ids = GGUFTokenizer.from_gguf(default_model_path()).encode(PROMPT)
    zero = _write_adapter(tmp_path / "zero.gguf", 0.0)
    moved = _write_adapter(tmp_path / "moved.gguf", 0.1)

    async def main() -> tuple[list[float], ...]:
        async with await EmbeddedTokenBackend.open(n_ctx=256, n_threads=1) as backend:
            base = await backend.score(ids)
            await backend.generate(ids, sampling=SamplingParams(temperature=0.0, max_tokens=2))
            assert backend.cached_ids  # the generation left its ids in the KV cache
            await backend.load_lora(moved)
            assert backend.cached_ids == ()  # keys/values of the old weights are gone
            adapted = await backend.score(ids)
            await backend.load_lora(zero)
            unchanged = await backend.score(ids)
            await backend.load_lora(None)
            restored = await backend.score(ids)
            return base, adapted, unchanged, restored

    base, adapted, unchanged, restored = (np.array(x) for x in anyio.run(main))
    assert np.abs(adapted - base).mean() > 0.05
    np.testing.assert_allclose(unchanged, base, atol=1e-4)
    np.testing.assert_array_equal(restored, base)


@pytest.mark.slow
def test_a_file_that_is_not_an_adapter_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")

    async def main() -> None:
        async with await EmbeddedTokenBackend.open(n_ctx=64, n_threads=1) as backend:
            with pytest.raises(ConfigError, match="LoRA adapter"):
                await backend.load_lora(bad)
            # the model still generates with its base weights
            generation = await backend.generate(
                [1, 2], sampling=SamplingParams(temperature=0.0, max_tokens=1)
            )
            assert len(generation.ids) == 1

    anyio.run(main)
