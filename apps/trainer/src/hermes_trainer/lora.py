"""LoRA adapters: their initial values and their export as a llama.cpp GGUF adapter.

A pair for projection ``W`` (numpy shape ``(out, in)``) is ``A`` ``(rank, in)`` and ``B``
``(out, rank)``; the adapted matrix is ``W + alpha / rank * B @ A``. ``B`` starts at zero, so
a new adapter leaves the model unchanged. The GGUF holds ``general.type = adapter``,
``adapter.type = lora``, ``adapter.lora.alpha`` and, per layer and projection, the tensors
``blk.N.<kind>.weight.lora_a`` / ``.lora_b`` in the layout llama.cpp loads (ggml ``ne`` of
``lora_a`` is ``[in, rank]``, of ``lora_b`` ``[rank, out]``). :func:`read_gguf_adapter` reads
such a file back (``--init-adapter``: a run starting from another run's adapter).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import attrs
import gguf
import numpy as np
from hermes_protocols import ConfigError

from hermes_trainer.gguf_weights import PROJECTIONS, BaseWeights, FloatArray

#: one adapter tensor's name: layer, projection kind, ``a`` or ``b``
_TENSOR = re.compile(r"blk\.(\d+)\.(\w+)\.weight\.lora_([ab])")

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


@attrs.frozen(kw_only=True)
class AdapterFile:
    """A LoRA adapter read from a GGUF: its pairs (stacked as :data:`LoraArrays`), rank and
    ``alpha``."""

    lora: LoraArrays
    rank: int
    alpha: float


def read_gguf_adapter(path: Path) -> AdapterFile:
    """The LoRA adapter :func:`write_gguf_adapter` (or llama.cpp's converter) wrote at
    ``path``: every layer of each projection kind, one rank; :class:`ConfigError` naming
    ``--init-adapter`` when it is not such a file. Blocking; call it off the event loop."""
    where = f"--init-adapter {path}"
    try:
        reader = gguf.GGUFReader(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: not a readable GGUF file ({exc})") from exc
    if _field(reader, "general.type") != "adapter" or _field(reader, "adapter.type") != "lora":
        raise ConfigError(f"{where}: not a LoRA adapter (general.type, adapter.type)")
    alpha = _field(reader, gguf.Keys.Adapter.LORA_ALPHA)
    if not isinstance(alpha, float):
        raise ConfigError(f"{where}: no {gguf.Keys.Adapter.LORA_ALPHA}")
    layers: dict[tuple[str, str], dict[int, FloatArray]] = {}
    for tensor in reader.tensors:
        match = _TENSOR.fullmatch(tensor.name)
        if match is None or tensor.tensor_type != gguf.GGMLQuantizationType.F32:
            raise ConfigError(
                f"{where}: unexpected tensor {tensor.name} ({tensor.tensor_type.name})"
            )
        layer, kind, side = match.groups()
        layers.setdefault((kind, side), {})[int(layer)] = np.array(tensor.data, dtype=np.float32)
    lora: dict[str, tuple[FloatArray, FloatArray]] = {}
    for kind in sorted({kind for kind, _side in layers}):
        a, b = (
            _stack(layers.get((kind, side), {}), f"{where}: {kind} lora_{side}") for side in "ab"
        )
        lora[kind] = (a, b)
    ranks = {a.shape[1] for a, _b in lora.values()} | {b.shape[2] for _a, b in lora.values()}
    if len(ranks) != 1:
        raise ConfigError(f"{where}: its LoRA pairs have different ranks {sorted(ranks)}")
    return AdapterFile(lora=lora, rank=ranks.pop(), alpha=alpha)


def _field(reader: gguf.GGUFReader, key: str) -> object:
    field = reader.get_field(key)
    return None if field is None else field.contents()


def _stack(by_layer: Mapping[int, FloatArray], what: str) -> FloatArray:
    """The layers ``0..n-1`` of one side of one projection, stacked."""
    if sorted(by_layer) != list(range(len(by_layer))) or not by_layer:
        raise ConfigError(f"{what}: layers {sorted(by_layer)} are not 0..n-1")
    shapes = {array.shape for array in by_layer.values()}
    if len(shapes) != 1:
        raise ConfigError(f"{what}: layers of different shapes {sorted(shapes)}")
    return np.stack([by_layer[i] for i in range(len(by_layer))])
