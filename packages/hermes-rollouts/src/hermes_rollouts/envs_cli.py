"""``uv run hermes-envs list|check``: the available environments, and the environment check.

``check ENV`` takes anything ``--env`` takes and exits 0 when every check passed, 1 when one
failed, 2 when ENV or an option is wrong (one line).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import anyio
from hermes_protocols import ConfigError, HermesError
from hermes_sandbox.factory import BACKEND_KINDS, SandboxSpec

from hermes_rollouts.boundary import root_error
from hermes_rollouts.check_faults import FAULT
from hermes_rollouts.command_line import CommandParser, json_object_option
from hermes_rollouts.credentials import Credentials
from hermes_rollouts.env_check import check_environment
from hermes_rollouts.plugins import environments_text

EXIT_PASSED, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
#: the check's options, for its error messages
OPTION_NAMES = {
    "environment.name": "ENV",
    "environment.options": "--env-options",
    "sandbox.image": "--sandbox-image",
    "sandbox.image_aliases": "--sandbox-image-alias NAME=IMAGE",
    "sandbox.urls": "--sandbox-url",
    "sandbox.token": "--sandbox-token or $HERMES_SANDBOX_TOKEN",
    "sandbox.nomad_address": "--nomad-address",
}


def _alias(text: str) -> tuple[str, str]:
    name, equals, image = text.partition("=")
    if not (name and equals and image):
        raise argparse.ArgumentTypeError(
            f"takes NAME=IMAGE (e.g. ubuntu:24.04=my-local:1), not {text!r}"
        )
    return name, image


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="hermes-envs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the shipped and installed environments")
    check = commands.add_parser(
        "check",
        help="run an environment through the real runner on a real sandbox; exit 1 on failure",
    )
    check.add_argument(
        "env",
        metavar="ENV",
        help="a shipped or installed name, package.module:NAME or path/to/file.py:NAME",
    )
    check.add_argument("--env-options", type=json_object_option, metavar="JSON", default=None)
    check.add_argument("--sandbox", choices=BACKEND_KINDS, default="bwrap", help="(bwrap)")
    check.add_argument("--sandbox-image", metavar="IMAGE", help="docker/modal/nomad image")
    check.add_argument(
        "--sandbox-image-alias",
        type=_alias,
        action="append",
        default=[],
        metavar="NAME=IMAGE",
        help="docker: use local IMAGE for NAME (items' own images, FROM of their Dockerfiles)",
    )
    check.add_argument("--sandbox-url", action="append", default=[], metavar="URL")
    check.add_argument("--sandbox-token", help="remote servers' token ($HERMES_SANDBOX_TOKEN)")
    check.add_argument("--nomad-address", metavar="URL")
    check.add_argument("--items", type=int, default=2, metavar="N", help="items to run (2)")
    check.add_argument("--seed", type=int, default=0, help="item seed (0)")
    check.add_argument("--setup-timeout", type=float, default=600.0, metavar="S")
    check.add_argument("--verify-timeout", type=float, default=900.0, metavar="S")
    check.add_argument("--oracle-timeout", type=float, default=600.0, metavar="S")
    return parser


def _check(args: argparse.Namespace) -> int:
    if args.items < 1:
        raise ConfigError(f"--items is {args.items}: use 1 or more")
    credentials = Credentials.from_environ(os.environ, sandbox_token=args.sandbox_token)
    sandbox = SandboxSpec(
        kind=args.sandbox,
        image=args.sandbox_image,
        image_aliases=args.sandbox_image_alias,
        urls=args.sandbox_url,
        token=credentials.sandbox_token,
        nomad_address=args.nomad_address,
        nomad_token=credentials.nomad_token,
    )
    report = anyio.run(
        lambda: check_environment(
            args.env,
            options=args.env_options,
            sandbox=sandbox,
            items=args.items,
            seed=args.seed,
            setup_timeout_s=args.setup_timeout,
            verify_timeout_s=args.verify_timeout,
            oracle_timeout_s=args.oracle_timeout,
            option_names=OPTION_NAMES,
        )
    )
    print(report.table())
    return EXIT_PASSED if report.passed else EXIT_FAILED


def _not_injected(record: logging.LogRecord) -> bool:
    """Drop the runner's warning about the fault the check injects on purpose."""
    return FAULT not in record.getMessage()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="hermes-envs: %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_injected)
    if args.command == "list":
        print(environments_text())
        return EXIT_PASSED
    try:
        return _check(args)
    except Exception as exc:
        error = root_error(exc)
        if isinstance(error, ConfigError):
            print(f"hermes-envs: {error}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(error, HermesError):
            print(f"hermes-envs: {type(error).__name__}: {error}", file=sys.stderr)
            return EXIT_FAILED
        raise
