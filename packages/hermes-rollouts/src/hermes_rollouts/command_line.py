"""What the command lines share: an argparse parser whose errors are one line, the
JSON-object option type, ``--list-envs``, and the progress display of long commands."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, NoReturn

from hermes_protocols import json_error
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from hermes_rollouts.plugins import environments_text


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose error is one line naming the option and what is wrong
    (``error: argument --x: ...; see --help``), not the usage block followed by it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}; see --help\n")


def json_object_option(text: str) -> dict[str, Any]:
    """An option's JSON object value (``type=`` of ``add_argument``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {json_error(exc)}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


class ListEnvironments(argparse.Action):
    """``--list-envs``: print the available environments and exit (like ``--help``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        print(environments_text())
        parser.exit()


def progress_bar(unit: str, *, console: Console, enabled: bool) -> Progress:
    """A long command's progress: a spinner, how many ``unit`` of the total are done (bar and
    count), the task's ``detail`` field and the time elapsed; hidden unless ``enabled``."""
    return Progress(
        SpinnerColumn(),
        TextColumn(f"[bold]{unit}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
    )
