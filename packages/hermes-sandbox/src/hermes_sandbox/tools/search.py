"""The ``search_files`` tool: regex search in file contents, or file-name (glob) search.

It runs ``grep``/``find`` inside the slot, so it works on every backend and sees exactly what
the agent's commands see. Results are paginated with ``limit`` and ``offset``. The search path
is always an operand (``--`` for grep, ``./`` before a relative path for find, so a path like
``-fprint`` is never an option or expression), and a search that failed without results (a
missing path, a bad pattern) is an error result, never "0 results".
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from hermes_protocols import Slot, ToolResult, ToolSchema

from hermes_sandbox.tools._args import int_arg, optional_string_arg, string_arg

_SKIPPED_DIRS = (".git", "node_modules", "__pycache__", ".hermes", ".venv")

SEARCH_FILES_SCHEMA = ToolSchema(
    name="search_files",
    description=(
        "Search file contents or find files by name. target='content': regex (extended) "
        "search inside files, results as path:line:text. target='files': find files whose "
        "name matches a glob pattern (e.g. '*.py'). Paginate with limit and offset."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Regex for content search, or glob (e.g. '*.py') for file search",
            },
            "target": {
                "type": "string",
                "enum": ["content", "files"],
                "default": "content",
                "description": "'content' searches inside files, 'files' matches file names",
            },
            "path": {
                "type": "string",
                "default": ".",
                "description": "Directory or file to search in (default: the workspace)",
            },
            "file_glob": {
                "type": "string",
                "description": "Only search files whose name matches this glob (content search)",
            },
            "limit": {"type": "integer", "minimum": 1, "default": 50, "description": "Max results"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Results to skip (pagination)",
            },
        },
        "required": ["pattern"],
    },
)


def _content_command(pattern: str, path: str, file_glob: str | None) -> str:
    excludes = " ".join(f"--exclude-dir={shlex.quote(d)}" for d in _SKIPPED_DIRS)
    include = f"--include={shlex.quote(file_glob)}" if file_glob else ""
    return f"grep -rnIE {excludes} {include} -e {shlex.quote(pattern)} -- {shlex.quote(path)}"


def _operand(path: str) -> str:
    """``path`` as find reads it: never an option or expression (``-fprint``, ``!``, ``(``)."""
    return path if path == "." or path.startswith(("/", "./")) else f"./{path}"


def _files_command(pattern: str, path: str) -> str:
    prune = " -o ".join(f"-name {shlex.quote(d)}" for d in _SKIPPED_DIRS)
    return (
        f"find {shlex.quote(_operand(path))} \\( {prune} \\) -prune -o "
        f"-type f -name {shlex.quote(pattern)} -print"
    )


class SearchFilesTool:
    """Content search with ``grep -rnIE`` or name search with ``find -name``, paginated."""

    def __init__(self, *, timeout: float = 60.0, max_line_chars: int = 500) -> None:
        self.timeout = timeout
        self.max_line_chars = max_line_chars

    @property
    def schema(self) -> ToolSchema:
        return SEARCH_FILES_SCHEMA

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        pattern = string_arg(arguments, "pattern")
        target = string_arg(arguments, "target", default="content")
        path = optional_string_arg(arguments, "path") or "."
        file_glob = optional_string_arg(arguments, "file_glob")
        limit = int_arg(arguments, "limit", default=50, minimum=1, maximum=1000)
        offset = int_arg(arguments, "offset", default=0, minimum=0)
        if target not in ("content", "files"):
            return ToolResult(
                content=json.dumps(
                    {"error": f"target must be 'content' or 'files', not {target!r}"}
                ),
                is_error=True,
            )
        command = (
            _content_command(pattern, path, file_glob)
            if target == "content"
            else _files_command(pattern, path)
        )
        result = await slot.exec(command, timeout=self.timeout)
        lines = [line for line in result.stdout.splitlines() if line]
        if target == "files":
            lines.sort()
        # grep exits 1 for "no match"; find only for errors.
        failed = result.timed_out or result.exit_code > (1 if target == "content" else 0)
        message = result.stderr.strip() or f"search failed with exit code {result.exit_code}"
        if failed and not lines:
            return ToolResult(content=json.dumps({"error": message}), is_error=True)
        page = [line[: self.max_line_chars] for line in lines[offset : offset + limit]]
        payload: dict[str, Any] = {
            "total": len(lines),
            "offset": offset,
            "matches" if target == "content" else "files": page,
        }
        if offset + len(page) < len(lines):
            payload["next_offset"] = offset + len(page)
        if result.truncated:
            payload["note"] = "search output was truncated; narrow the pattern or path"
        if failed:
            payload["errors"] = message[:2000]
        return ToolResult(
            content=json.dumps(payload, ensure_ascii=False),
            metadata={"total": len(lines), "returned": len(page)},
        )
