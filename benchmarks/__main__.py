"""Run every benchmark module in this folder (``bench_*.py``), each with its own ``main()``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(selected: list[str]) -> int:
    folder = Path(__file__).parent
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(folder)]) if m.name.startswith("bench_")
    )
    if selected:
        names = [n for n in names if any(s in n for s in selected)]
    if not names:
        print("no benchmarks selected", file=sys.stderr)
        return 1
    for name in names:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
