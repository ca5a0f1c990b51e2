"""JAX's persistent compilation cache for the learner: a run whose shapes an earlier run
compiled loads XLA's programs instead of compiling them (SmolLM2, one SFT step of 2 x 24
tokens: 33.8 s cold, 27.4 s warm; docs/training.md)."""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path


def cpu_key() -> str:
    """A short hash of this CPU's feature flags (``/proc/cpuinfo``; empty elsewhere). XLA
    compiles for the host CPU and JAX's cache key does not name its features, so a home
    directory shared by machines of different CPUs needs one cache per CPU."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    flags = next((line for line in lines if line.startswith("flags")), "")
    return hashlib.sha256(flags.encode()).hexdigest()[:12]


def default_compile_cache() -> Path:
    """``~/.cache/hermes-rl/jax-<JAX version>-<CPU>``."""
    return Path.home() / ".cache" / "hermes-rl" / f"jax-{version('jax')}-{cpu_key()}"


def use_compile_cache(directory: Path) -> None:
    """Keep every compiled program in ``directory`` from now on (this process); an
    ``OSError`` when it cannot be created."""
    import jax  # half a second to load: not before the options are checked

    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))  # type: ignore[no-untyped-call]
    # the learner's programs compile in well under JAX's default 1 s threshold each; together
    # they are the seconds a run saves
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # type: ignore[no-untyped-call]
