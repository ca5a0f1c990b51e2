"""Which GGUF weight types llama.cpp's CPU batched matrix kernels cover.

llama.cpp multiplies a weight matrix with several tokens at once through the llamafile
"tinyBLAS" kernels (``ggml/src/ggml-cpu/llamafile/sgemm.cpp``) only for the types below; any
other type (Q4_1, Q4_K, Q6_K, ...) takes one dot product per token and output, so batching
sequences or prompt ids buys little on it.
"""

from __future__ import annotations

import logging

import gguf

_log = logging.getLogger("hermes_loop.embedded")

#: file types (``general.file_type``) whose weight matrices the batched kernels cover
BATCHED_FILE_TYPES = frozenset(
    {
        gguf.LlamaFileType.ALL_F32,
        gguf.LlamaFileType.MOSTLY_F16,
        gguf.LlamaFileType.MOSTLY_BF16,
        gguf.LlamaFileType.MOSTLY_Q8_0,
        gguf.LlamaFileType.MOSTLY_Q4_0,
        gguf.LlamaFileType.MOSTLY_Q5_0,
        gguf.LlamaFileType.MOSTLY_IQ4_NL,
    }
)
#: the same, as tensor types
BATCHED_TENSOR_TYPES = frozenset(
    {
        gguf.GGMLQuantizationType.F32,
        gguf.GGMLQuantizationType.F16,
        gguf.GGMLQuantizationType.BF16,
        gguf.GGMLQuantizationType.Q8_0,
        gguf.GGMLQuantizationType.Q4_0,
        gguf.GGMLQuantizationType.Q5_0,
        gguf.GGMLQuantizationType.IQ4_NL,
    }
)
COVERED = "F32/BF16/F16/Q8_0/Q4_0/Q5_0/IQ4_NL"


def file_type_name(value: int) -> str:
    """``3`` -> ``"Q4_1"``; an unknown number stays a number."""
    try:
        name = gguf.LlamaFileType(value).name
    except ValueError:
        return str(value)
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def note_unbatched(path_name: str, file_type: str | None) -> None:
    """Log one line when the model's weight type (``general.file_type``, as llama.cpp reads
    it) has no batched CPU kernel; nothing when it has one or the file does not say."""
    if file_type is None or not file_type.strip().isdigit():
        return
    value = int(file_type)
    if value in BATCHED_FILE_TYPES:
        return
    _log.warning(
        "%s: %s weights have no batched CPU kernel in llama.cpp (covered: %s); concurrent "
        "rollouts and prompts run slower than on a Q8_0 or F16 copy",
        path_name,
        file_type_name(value),
        COVERED,
    )
