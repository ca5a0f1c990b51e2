"""A GGUF file's metadata and tensor index, parsed in milliseconds.

``gguf.GGUFReader`` builds a numpy view per array element: about 4.7 s for SmolLM2's
49,152-token vocabulary and 48,900 merges, paid at every embedded start and again by the
trainer. This reads the same format (GGUF v2/v3, little-endian: header, key/value pairs, tensor
infos, aligned data) with one ``struct`` call per string and one ``numpy`` view per numeric
array; the tensors are views into a read-only memory map, laid out as ``GGUFReader`` lays them
out (``gguf.quants.dequantize`` takes them as they are).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import attrs
import gguf
import numpy as np
import numpy.typing as npt
from hermes_protocols import ConfigError

#: a metadata value as it reads: a scalar, a string, or a list of either
MetadataValue = int | float | bool | str | list["MetadataValue"]

_SCALARS: Mapping[gguf.GGUFValueType, str] = {
    gguf.GGUFValueType.UINT8: "<u1",
    gguf.GGUFValueType.INT8: "<i1",
    gguf.GGUFValueType.UINT16: "<u2",
    gguf.GGUFValueType.INT16: "<i2",
    gguf.GGUFValueType.UINT32: "<u4",
    gguf.GGUFValueType.INT32: "<i4",
    gguf.GGUFValueType.FLOAT32: "<f4",
    gguf.GGUFValueType.BOOL: "<u1",
    gguf.GGUFValueType.UINT64: "<u8",
    gguf.GGUFValueType.INT64: "<i8",
    gguf.GGUFValueType.FLOAT64: "<f8",
}
_DEFAULT_ALIGNMENT = 32
_LENGTH = struct.Struct("<Q")


@attrs.frozen
class GGUFTensor:
    """One tensor: ``data`` is its bytes as ``(*rows, bytes per row)`` ``uint8`` (rows in
    numpy order, the GGUF's dimensions reversed), what ``gguf.quants.dequantize`` expects."""

    name: str
    shape: tuple[int, ...]  # the GGUF's order: the fastest-varying dimension first
    tensor_type: gguf.GGMLQuantizationType
    data: npt.NDArray[np.uint8]


@attrs.frozen
class GGUFFile:
    """A GGUF file's metadata (``key -> value``) and tensors, in file order."""

    metadata: Mapping[str, MetadataValue]
    tensors: tuple[GGUFTensor, ...]


class _Cursor:
    """Reads little-endian GGUF values from a buffer, front to back."""

    def __init__(self, buffer: npt.NDArray[np.uint8], where: str) -> None:
        self.buffer = buffer
        self.view = memoryview(buffer)  # type: ignore[arg-type]
        self.offset = 0
        self.where = where

    def scalar(self, code: str) -> int:
        (value,) = struct.unpack_from(code, self.view, self.offset)
        self.offset += struct.calcsize(code)
        return int(value)

    def string(self) -> str:
        (text,) = self._strings(1)
        return str(text)

    def value(self, kind: int) -> MetadataValue:
        value_type = self._value_type(kind)
        if value_type is gguf.GGUFValueType.STRING:
            return self.string()
        if value_type is gguf.GGUFValueType.ARRAY:
            element = self._value_type(self.scalar("<I"))
            count = self.scalar("<Q")
            if element in _SCALARS:
                return self._numbers(element, count)
            if element is gguf.GGUFValueType.STRING:
                return self._strings(count)
            return [self.value(element) for _ in range(count)]
        return self._numbers(value_type, 1)[0]

    def _strings(self, count: int) -> list[MetadataValue]:
        """``count`` strings (a vocabulary: one tight loop, the hot path of a model's start)."""
        view, offset, unpack = self.view, self.offset, _LENGTH.unpack_from
        strings: list[MetadataValue] = []
        for _ in range(count):
            (length,) = unpack(view, offset)
            offset += 8
            strings.append(str(view[offset : offset + length], "utf-8", "replace"))
            offset += length
        if offset > len(view):
            raise ConfigError(f"{self.where}: truncated GGUF (a string runs past the end)")
        self.offset = offset
        return strings

    def _numbers(self, value_type: gguf.GGUFValueType, count: int) -> list[MetadataValue]:
        dtype = np.dtype(_SCALARS[value_type])
        end = self.offset + dtype.itemsize * count
        if end > len(self.buffer):
            raise ConfigError(f"{self.where}: truncated GGUF (an array runs past the end)")
        numbers = self.buffer[self.offset : end].view(dtype)
        self.offset = end
        if value_type is gguf.GGUFValueType.BOOL:
            return [bool(n) for n in numbers]
        values: list[MetadataValue] = numbers.tolist()
        return values

    def _value_type(self, kind: int) -> gguf.GGUFValueType:
        try:
            return gguf.GGUFValueType(kind)
        except ValueError:
            raise ConfigError(f"{self.where}: unknown GGUF value type {kind}") from None


def read_gguf_file(path: str | Path) -> GGUFFile:
    """Parse the GGUF at ``path`` (blocking; tens of milliseconds for SmolLM2); a file that is
    not GGUF v2/v3 little-endian, or is cut short, is a :class:`ConfigError` naming it."""
    where = str(path)
    try:
        buffer = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot read the GGUF file ({exc})") from exc
    cursor = _Cursor(buffer, where)
    try:
        return _parse(cursor)
    except struct.error:
        raise ConfigError(f"{where}: truncated GGUF") from None


def _parse(cursor: _Cursor) -> GGUFFile:
    if bytes(cursor.view[:4]) != b"GGUF":
        raise ConfigError(f"{cursor.where}: not a GGUF file")
    cursor.offset = 4
    version = cursor.scalar("<I")
    if version not in (2, 3):
        raise ConfigError(
            f"{cursor.where}: GGUF version {version} is not supported (2 and 3, little-endian)"
        )
    n_tensors, n_fields = cursor.scalar("<Q"), cursor.scalar("<Q")
    metadata: dict[str, MetadataValue] = {}
    for _ in range(n_fields):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.scalar("<I"))
    infos = []
    for _ in range(n_tensors):
        name = cursor.string()
        shape = tuple(cursor.scalar("<Q") for _ in range(cursor.scalar("<I")))
        infos.append((name, shape, cursor.scalar("<I"), cursor.scalar("<Q")))
    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0:
        raise ConfigError(f"{cursor.where}: bad general.alignment {alignment!r}")
    start = -(-cursor.offset // alignment) * alignment
    tensors = tuple(_tensor(cursor, start, *info) for info in infos)
    return GGUFFile(MappingProxyType(metadata), tensors)


def _tensor(
    cursor: _Cursor, start: int, name: str, shape: tuple[int, ...], kind: int, offset: int
) -> GGUFTensor:
    try:
        tensor_type = gguf.GGMLQuantizationType(kind)
    except ValueError:
        raise ConfigError(f"{cursor.where}: tensor {name} has unknown type {kind}") from None
    block_size, type_size = gguf.GGML_QUANT_SIZES[tensor_type]
    row_bytes = shape[0] // block_size * type_size
    rows = tuple(reversed(shape[1:]))
    size = row_bytes * int(np.prod(rows, dtype=np.int64))
    begin = start + offset
    if shape[0] % block_size or begin + size > len(cursor.buffer):
        raise ConfigError(f"{cursor.where}: tensor {name} runs past the end of the file")
    data = cursor.buffer[begin : begin + size].reshape((*rows, row_bytes))
    return GGUFTensor(name, shape, tensor_type, data)
