"""LoRA adapters: their initial values and their export as a llama.cpp GGUF adapter.

A pair for projection ``W`` (numpy shape ``(out, in)``) is ``A`` ``(rank, in)`` and ``B``
``(out, rank)``; the adapted matrix is ``W + alpha / rank * B @ A``. ``B`` starts at zero, so
a new adapter leaves the model unchanged. The GGUF holds ``general.type = adapter``,
``adapter.type = lora``, ``adapter.lora.alpha`` and, per layer and projection, the tensors
``blk.N.<kind>.weight.lora_a`` / ``.lora_b`` in the layout llama.cpp loads (ggml ``ne`` of
``lora_a`` is ``[in, rank]``, of ``lora_b`` ``[rank, out]``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import gguf
import numpy as np

from hermes_trainer.gguf_weights import PROJECTIONS, BaseWeights, FloatArray

LoraArrays = Mapping[str, tuple[FloatArray, FloatArray]]
"""Per projection kind: ``A`` stacked ``(layers, rank, in)`` and ``B`` ``(layers, out, rank)``."""


@attrs.frozen(kw_only=True)
class LoraSpec:
    """Which projections get an adapter, its rank and ``alpha`` (scale ``alpha / rank``)."""

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = PROJECTIONS

    def __attrs_post_init__(self) -> None:
        unknown = sorted(set(self.targets) - set(PROJECTIONS))
        if unknown or not self.targets:
            raise ValueError(f"LoRA targets must be a non-empty subset of {PROJECTIONS}")
        if self.rank < 1 or self.alpha <= 0:
            raise ValueError("--lora-rank must be >= 1 and --lora-alpha > 0")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


def initial_lora(
    base: BaseWeights, spec: LoraSpec, seed: int
) -> dict[str, tuple[FloatArray, FloatArray]]:
    """``A`` drawn from ``N(0, 1 / in)``, ``B`` zero: the adapted model equals the base."""
    rng = np.random.default_rng(seed)
    pairs: dict[str, tuple[FloatArray, FloatArray]] = {}
    for kind in spec.targets:
        layers, out_dim, in_dim = base.layers[kind].shape
        a = rng.normal(0.0, in_dim**-0.5, size=(layers, spec.rank, in_dim)).astype(np.float32)
        b = np.zeros((layers, out_dim, spec.rank), dtype=np.float32)
        pairs[kind] = (a, b)
    return pairs


def write_gguf_adapter(path: str | Path, lora: LoraArrays, alpha: float) -> Path:
    """Write ``lora`` as a llama.cpp LoRA adapter GGUF at ``path`` (atomically: a reader never
    sees half a file). Blocking; call it off the event loop."""
    target = Path(path)
    staging = target.with_name(f".{target.name}.partial")
    writer = gguf.GGUFWriter(str(staging), arch="llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for kind in sorted(lora):
        a_stack, b_stack = lora[kind]
        for layer in range(a_stack.shape[0]):
            name = f"blk.{layer}.{kind}.weight"
            writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a_stack[layer]))
            writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b_stack[layer]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(staging, target)
    return target
