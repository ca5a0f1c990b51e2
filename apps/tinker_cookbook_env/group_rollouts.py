"""tinker-cookbook group rollouts with this checkout's environments: run it with the
tinker-cookbook venv's Python (``.ci/tinker-cookbook.sh`` makes it), e.g.

    ~/.cache/hermes-rl/tinker-cookbook-0.6.1/venv/bin/python \\
        apps/tinker_cookbook_env/group_rollouts.py --env endless_terminals --out groups.jsonl

The workspace's packages (``uv sync``) and this adapter are put on ``sys.path`` *after*
tinker-cookbook's own, so it keeps the versions it was installed with.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # apps/: the shared part
from foreign_venv import join_workspace


def main() -> int:
    join_workspace(__file__)
    from hermes_tinker_cookbook_env.group_rollouts import main as group_rollouts

    return group_rollouts(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
