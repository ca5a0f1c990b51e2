"""``vf-eval`` with this checkout's environments: run it with the verifiers venv's Python
(``.ci/verifiers.sh`` makes it), e.g.

    ~/.cache/hermes-rl/verifiers-0.4.0/venv/bin/python apps/verifiers_env/vf_eval.py \\
        hermes-verifiers-env -n 2 ...

The workspace's packages (``uv sync``) and this adapter are put on ``sys.path`` *after*
verifiers' own, so verifiers keeps the openai it pins and our packages come from the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # apps/: the shared part
from foreign_venv import join_workspace


def main() -> int:
    join_workspace(__file__)
    from verifiers.v1.cli.eval.main import main as vf_eval  # type: ignore[import-not-found]

    result = vf_eval()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
