"""Benchmarks, run with `uv run nox -s bench`; results land in docs/benchmarks.md."""
