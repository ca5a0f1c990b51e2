"""Convert a GGUF's weights to a type llama.cpp's CPU batched kernels cover, once, cached.

The shipped SmolLM2 GGUF is Q4_1, which llama.cpp's batched CPU kernels do not cover
(:mod:`hermes_loop.embedded.weight_types`). :func:`converted_model` dequantizes every weight of
an uncovered type with the ``gguf`` package and requantizes it to :data:`DEFAULT_TARGET`
(every other tensor and all metadata are copied as they are), into
``cache_dir/<source sha256>-<type>-v<CONVERSION_VERSION>/<name>.<TYPE>.gguf``: a temporary file
renamed into place, so concurrent first uses never see a partial file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

import gguf
import numpy as np
from hermes_protocols import ConfigError

from hermes_loop.embedded.weight_types import BATCHED_TENSOR_TYPES

_log = logging.getLogger("hermes_loop.embedded")

Q8_0 = gguf.GGMLQuantizationType.Q8_0
F16 = gguf.GGMLQuantizationType.F16
#: what the default model is converted to (measured against F16: docs/embedded.md)
DEFAULT_TARGET = Q8_0
#: the file types the targets give (``general.file_type``)
_FILE_TYPES = {Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0, F16: gguf.LlamaFileType.MOSTLY_F16}
#: bumped whenever the converted file changes for the same source, so stale copies are not used
CONVERSION_VERSION = 1
_CHUNK = 1 << 20


def default_model_cache_dir() -> Path:
    """``~/.cache/hermes-rl/models``: where the converted default model is kept."""
    return Path.home() / ".cache" / "hermes-rl" / "models"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def converted_path(source: Path, cache_dir: Path, target: gguf.GGMLQuantizationType) -> Path:
    """Where the conversion of ``source`` to ``target`` lives in ``cache_dir``."""
    key = f"{file_sha256(source)[:32]}-{target.name.lower()}-v{CONVERSION_VERSION}"
    name = source.stem.rsplit(".", 1)[0] if "." in source.stem else source.stem
    return cache_dir / key / f"{name}.{target.name}.gguf"


def converted_model(
    source: Path,
    cache_dir: Path,
    target: gguf.GGMLQuantizationType = DEFAULT_TARGET,
) -> Path:
    """``source`` with its uncovered weights in ``target``, converted on first use (blocking:
    a few seconds; call it off the event loop). A cache that cannot be written is a
    :class:`ConfigError` saying what to do."""
    final = converted_path(source, cache_dir, target)
    if final.is_file():
        return final
    _log.warning(
        "converting %s to %s once (llama.cpp's batched CPU kernels do not cover its weights), "
        "into %s",
        source.name,
        target.name,
        final.parent,
    )
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=".convert-", suffix=".gguf", dir=final.parent)
        os.close(handle)
    except OSError as exc:
        raise _unwritable(cache_dir, source, exc) from exc
    try:
        write_converted(source, Path(staging), target)
        os.replace(staging, final)  # atomic: a concurrent first use replaces an equal file
    except OSError as exc:
        raise _unwritable(cache_dir, source, exc) from exc
    finally:
        Path(staging).unlink(missing_ok=True)
    return final


def _unwritable(cache_dir: Path, source: Path, exc: OSError) -> ConfigError:
    reason = exc.strerror or type(exc).__name__
    return ConfigError(
        f"cannot write the converted default model into {cache_dir} ({reason}): make that "
        f"directory writable, or pass the model file {source} to use it as it is (slower)"
    )


def write_converted(source: Path, target_file: Path, target: gguf.GGMLQuantizationType) -> None:
    """Write ``source`` to ``target_file`` with every weight of an uncovered type in
    ``target`` (dequantized to float32, then quantized as llama.cpp's reference does)."""
    if target not in _FILE_TYPES:
        raise ValueError(f"converting to {target.name} is not supported")
    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(target_file, arch=str(arch))
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = field.contents()
        if field.name == "general.file_type":
            value = int(_FILE_TYPES[target])
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub_type)
    for tensor in reader.tensors:
        if tensor.tensor_type in BATCHED_TENSOR_TYPES:
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
            continue
        weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if target == F16:
            writer.add_tensor(tensor.name, weights.astype(np.float16))
        else:
            writer.add_tensor(tensor.name, gguf.quants.quantize(weights, target), raw_dtype=target)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
