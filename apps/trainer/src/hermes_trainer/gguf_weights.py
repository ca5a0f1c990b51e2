"""The base model's hyperparameters and weights, read from a llama-architecture GGUF.

Weights are dequantized to float32 with ``gguf`` and kept in the GGUF's own layout (numpy shape
``(out, in)``; the query and key rows permuted for llama.cpp's pairwise RoPE), so a LoRA
adapter trained on them applies to llama.cpp's tensors as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs
import gguf
import numpy as np
import numpy.typing as npt
from hermes_protocols import ConfigError
from hermes_rollouts import read_gguf_file

if TYPE_CHECKING:
    from hermes_rollouts.models import GGUFFile, GGUFTensor

FloatArray = npt.NDArray[np.float32]

#: the per-layer matrices LoRA can adapt, by GGUF tensor kind
PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
_NORMS = ("attn_norm", "ffn_norm")


@attrs.frozen(kw_only=True)
class LlamaConfig:
    """The hyperparameters a Llama forward pass needs (``llama.*`` GGUF metadata)."""

    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    rope_base: float
    rms_eps: float

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@attrs.frozen(kw_only=True)
class BaseWeights:
    """Frozen base weights: ``layers[kind]`` stacks one tensor per layer on axis 0."""

    config: LlamaConfig
    embed: FloatArray
    out_norm: FloatArray
    output: FloatArray | None
    layers: Mapping[str, FloatArray]

    @property
    def lm_head(self) -> FloatArray:
        """The output projection (the embedding matrix when the model ties them)."""
        return self.embed if self.output is None else self.output


def _field(reader: GGUFFile, key: str) -> object:
    if key not in reader.metadata:
        raise ConfigError(f"the GGUF has no {key!r}; is it a llama-architecture model?")
    return reader.metadata[key]


def _number(reader: GGUFFile, key: str) -> float:
    value = _field(reader, key)
    if not isinstance(value, int | float):
        raise ConfigError(f"the GGUF's {key!r} is not a number: {value!r}")
    return float(value)


def read_config(reader: GGUFFile) -> LlamaConfig:
    """The ``llama.*`` hyperparameters; any other architecture is a :class:`ConfigError`."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ConfigError(f"the trainer supports llama-architecture GGUFs, not {arch!r}")
    embed = next(t for t in reader.tensors if t.name == "token_embd.weight")
    return LlamaConfig(
        n_layers=int(_number(reader, "llama.block_count")),
        d_model=int(_number(reader, "llama.embedding_length")),
        d_ff=int(_number(reader, "llama.feed_forward_length")),
        n_heads=int(_number(reader, "llama.attention.head_count")),
        n_kv_heads=int(_number(reader, "llama.attention.head_count_kv")),
        vocab_size=embed.shape[1],
        rope_base=_number(reader, "llama.rope.freq_base"),
        rms_eps=_number(reader, "llama.attention.layer_norm_rms_epsilon"),
    )


def _dequantized(tensor: GGUFTensor) -> FloatArray:
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return np.ascontiguousarray(values, dtype=np.float32)


def read_base_weights(path: str | Path) -> BaseWeights:
    """Every weight of the GGUF at ``path``, dequantized (blocking: call it off the loop)."""
    reader = read_gguf_file(path)
    config = read_config(reader)
    tensors = {t.name: t for t in reader.tensors}
    per_layer: dict[str, list[FloatArray]] = {kind: [] for kind in (*PROJECTIONS, *_NORMS)}
    for layer in range(config.n_layers):
        for kind, stack in per_layer.items():
            name = f"blk.{layer}.{kind}.weight"
            if name not in tensors:
                raise ConfigError(f"the GGUF has no tensor {name!r}")
            stack.append(_dequantized(tensors[name]))
    output = tensors.get("output.weight")
    return BaseWeights(
        config=config,
        embed=_dequantized(tensors["token_embd.weight"]),
        out_norm=_dequantized(tensors["output_norm.weight"]),
        output=None if output is None else _dequantized(output),
        layers=MappingProxyType({kind: np.stack(stack) for kind, stack in per_layer.items()}),
    )
