"""GRPO with TRL on our environments: run it with the TRL venv's Python (``.ci/trl.sh`` makes
it), e.g.

    ~/.cache/hermes-rl/trl-1.16.0/venv/bin/python apps/trl_env/grpo.py --model DIR ...

The workspace's packages (``uv sync``) and this adapter are put on ``sys.path`` *after* TRL's
own, so TRL keeps the transformers and torch it runs with and our packages come from the checkout.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def main() -> int:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    workspace = ROOT / ".venv" / "lib" / version / "site-packages"
    if not workspace.is_dir():
        sys.exit(f"grpo.py: no workspace environment at {workspace}: run `uv sync` first")
    site.addsitedir(str(workspace))
    sys.path.append(str(HERE / "src"))
    from hermes_trl_env.train import main as train

    return train()


if __name__ == "__main__":
    sys.exit(main())
