"""``python -m hermes_atropos_env.trainer``: register with run-api, pull batches, check them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import anyio

from hermes_atropos_env import trainer
from hermes_atropos_env.trainer import batch_problems, run_trainer, summarize


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hermes_atropos_env.trainer", description=trainer.__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-token-len", type=int, default=2048)
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", help="write the batches as JSON to this file")
    args = parser.parse_args(argv)
    batches = anyio.run(
        lambda: run_trainer(
            args.url,
            batch_size=args.batch_size,
            max_token_len=args.max_token_len,
            batches=args.batches,
            timeout=args.timeout,
        )
    )
    status = 0
    for index, batch in enumerate(batches):
        problems = batch_problems(batch)
        print(json.dumps({"batch": index, **summarize(batch), "problems": problems}))
        status = status or int(bool(problems))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(batches, handle)
    return status


if __name__ == "__main__":
    sys.exit(main())
