"""``hermes-sandbox`` command line.

``serve --port N --slots K ...``: serve one sandbox host over HTTP. ``cleanup [--root DIR]
[--dry-run]``: remove what this user's dead pools left behind. ``build-executor OUT``: build
the sandbox's command executor (``hermes-exec``) for a machine without a C compiler.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import anyio
from hermes_protocols import SandboxError

from hermes_sandbox.backends.base import HostBackend
from hermes_sandbox.backends.bwrap import BwrapBackend, BwrapConfig
from hermes_sandbox.backends.local import LocalBackend, LocalConfig
from hermes_sandbox.cleanup import DirectorySweeper, LeftoverSweeper, default_sweepers
from hermes_sandbox.executor import build_agent
from hermes_sandbox.server.app import ServerConfig
from hermes_sandbox.server.run import print_ready, serve

TOKEN_ENV = "HERMES_SANDBOX_TOKEN"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermes-sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the slots of one sandbox host over HTTP")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8930, help="port (0 picks a free one)")
    s.add_argument("--slots", type=int, default=4, help="number of slot workspaces")
    s.add_argument("--data-dir", required=True, help="workspaces, artifacts and temp files")
    s.add_argument(
        "--token",
        default=None,
        help=f"bearer token clients must send (default: ${TOKEN_ENV}; prefer the variable)",
    )
    s.add_argument(
        "--backend",
        choices=("bwrap", "local"),
        default="bwrap",
        help="bwrap (default, isolated) or local (NO isolation, for development only)",
    )
    s.add_argument("--allow-network", action="store_true", help="let slot commands use the net")
    s.add_argument("--pool-name", default="hermes-server", help="name prefix of host dirs")
    s.add_argument("--max-output-bytes", type=int, default=1 << 20)
    s.add_argument("--log-level", default="warning")
    c = sub.add_parser(
        "cleanup",
        help="remove host directories, mounts, cgroups and processes of this user's dead pools",
    )
    c.add_argument(
        "--root",
        action="append",
        default=[],
        help="also sweep this backend root_dir (registered roots and defaults always are)",
    )
    c.add_argument("--only", action="store_true", help="sweep only the --root directories given")
    c.add_argument(
        "--runsc", default="runsc", help="gVisor's runsc, for dead gvisor pools (default: on PATH)"
    )
    c.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    c.add_argument("--log-level", default="warning")
    b = sub.add_parser("build-executor", help="build hermes-exec (needs a C compiler)")
    b.add_argument("output", help="directory to write hermes-exec-<digest> into")
    b.add_argument("--log-level", default="warning")
    return parser


def _backend(args: argparse.Namespace) -> HostBackend:
    root = os.path.join(os.path.abspath(args.data_dir), "hosts")
    if args.backend == "local":
        logging.getLogger(__name__).warning(
            "hermes-sandbox serve: --backend local runs commands WITHOUT isolation"
        )
        return LocalBackend(LocalConfig(root_dir=root, max_output_bytes=args.max_output_bytes))
    return BwrapBackend(
        BwrapConfig(
            root_dir=root,
            allow_network=args.allow_network,
            max_output_bytes=args.max_output_bytes,
        )
    )


async def _cleanup(roots: Sequence[str], only: bool, dry_run: bool, runsc: str) -> int:
    verb = "would remove" if dry_run else "removed"
    total = 0
    sweepers: list[LeftoverSweeper]
    if only:
        sweepers = [DirectorySweeper(roots, everywhere=False)]
    else:
        sweepers = default_sweepers(roots, runsc)
    for sweeper in sweepers:
        for item in await sweeper.sweep(dry_run=dry_run):
            if item.kind == "skipped":
                print(f"hermes-sandbox cleanup: could not remove {item.what}", file=sys.stderr)
                continue
            print(f"{verb} {item.kind} {item.what}")
            total += 1
    print(f"hermes-sandbox cleanup: {verb} {total} leftover(s) of dead pools")
    return 0


def _serve(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        print(f"hermes-sandbox serve: pass --token or set {TOKEN_ENV}", file=sys.stderr)
        return 2
    config = ServerConfig(
        slots=args.slots,
        data_dir=os.path.abspath(args.data_dir),
        token=token,
        pool_name=args.pool_name,
    )
    anyio.run(
        lambda: serve(
            config,
            _backend(args),
            host=args.host,
            port=args.port,
            on_ready=print_ready,
            log_level=args.log_level,
        )
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    try:
        if args.command == "cleanup":
            return anyio.run(_cleanup, args.root, args.only, args.dry_run, args.runsc)
        if args.command == "build-executor":
            print(build_agent(os.path.abspath(args.output)))
            return 0
        return _serve(args)
    except (ValueError, SandboxError, OSError) as exc:
        print(f"hermes-sandbox {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
