"""GRPO with TRL on our environments: run it with the TRL venv's Python (``.ci/trl.sh`` makes
it), e.g.

    ~/.cache/hermes-rl/trl-1.16.0/venv/bin/python apps/trl_env/grpo.py --model DIR ...

The workspace's packages (``uv sync``) and this adapter are put on ``sys.path`` *after* TRL's
own, so TRL keeps the transformers and torch it runs with and our packages come from the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # apps/: the shared part
from foreign_venv import join_workspace


def main() -> int:
    join_workspace(__file__)
    from hermes_trl_env.train import main as train

    return train()


if __name__ == "__main__":
    sys.exit(main())
