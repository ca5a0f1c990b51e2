"""File tools: ``read_file`` (numbered lines), ``write_file`` and ``patch`` (exact replacement).

They go through the slot's binary-safe file API, so on local/bwrap backends they cannot leave
the workspace (``..``, absolute paths elsewhere, escaping symlinks are refused). Relative paths
are relative to the workspace root.
"""

from __future__ import annotations

import difflib
import errno
import json
from collections.abc import Mapping
from typing import Any

from hermes_protocols import SandboxError, Slot, ToolResult, ToolSchema, WorkspaceEscape

from hermes_sandbox.file_window import FileTooLarge, TextWindow, WindowedFiles
from hermes_sandbox.tools._args import bool_arg, int_arg, string_arg

MAX_PATCH_BYTES = 8 << 20
"""Largest file ``patch`` edits (it holds the file and its edited copy in memory)."""

_PATH = {"type": "string", "description": "File path (relative to the workspace, or absolute)"}

READ_FILE_SCHEMA = ToolSchema(
    name="read_file",
    description=(
        "Read a text file with line numbers (LINE_NUM|CONTENT). Use offset and limit to page "
        "through large files."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "Line number to start reading from (1-indexed)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 2000,
                "default": 500,
                "description": "Maximum number of lines to read",
            },
        },
        "required": ["path"],
    },
)

WRITE_FILE_SCHEMA = ToolSchema(
    name="write_file",
    description="Write content to a file, replacing it entirely; parent directories are created.",
    parameters={
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete content of the file"},
        },
        "required": ["path", "content"],
    },
)

PATCH_SCHEMA = ToolSchema(
    name="patch",
    description=(
        "Edit a file by exact string replacement. old_string must occur exactly once unless "
        "replace_all is true. Returns a unified diff of the change."
    ),
    parameters={
        "type": "object",
        "properties": {
            "mode": {
                "type": "string",
                "enum": ["replace"],
                "default": "replace",
                "description": "Edit mode; only 'replace' is supported",
            },
            "path": _PATH,
            "old_string": {"type": "string", "description": "Exact text to find"},
            "new_string": {"type": "string", "description": "Replacement text (may be empty)"},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence instead of requiring a unique match",
            },
        },
        "required": ["path", "old_string", "new_string"],
    },
)


def _error(message: str, **metadata: Any) -> ToolResult:
    return ToolResult(
        content=json.dumps({"error": message}, ensure_ascii=False),
        is_error=True,
        metadata=metadata,
    )


def _file_error(path: str, exc: BaseException) -> ToolResult:
    """The error result for a failed file access; names the path the model asked for."""
    if isinstance(exc, WorkspaceEscape):
        return _error(f"access denied: {exc}")
    if isinstance(exc, FileTooLarge):
        return _error(str(exc))
    if isinstance(exc, FileNotFoundError):
        return _error(f"file not found: {path}")
    if isinstance(exc, IsADirectoryError):
        return _error(f"{path} is a directory, not a file")
    if isinstance(exc, PermissionError):
        return _error(f"permission denied: {path}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return _error(
            f"cannot write {path}: the slot's disk limit is reached ({exc.strerror}); "
            "delete files to free space"
        )
    if isinstance(exc, OSError) and exc.strerror:
        return _error(f"cannot access {path}: {exc.strerror}")
    return _error(f"cannot access {path}: {exc}")


async def _read_text(slot: Slot, path: str, max_bytes: int) -> str | ToolResult:
    try:
        if isinstance(slot, WindowedFiles):
            data = await slot.read_capped(path, max_bytes)
        else:
            data = await slot.read_file(path)
    except (OSError, SandboxError) as exc:
        return _file_error(path, exc)
    if len(data) > max_bytes:
        return _file_error(path, FileTooLarge(path, len(data), max_bytes))
    if b"\x00" in data[:8192]:
        return _error(f"{path} looks like a binary file; use the terminal to inspect it")
    return data.decode("utf-8", "replace")


def _window_from_text(text: str, offset: int, limit: int) -> TextWindow:
    lines = text.splitlines()
    chosen = tuple(lines[offset - 1 : offset - 1 + limit])
    return TextWindow(offset, chosen, len(lines), len(text))


class ReadFileTool:
    """Returns lines ``offset``..``offset+limit-1`` as ``N|text`` with a paging notice."""

    def __init__(self, *, max_line_chars: int = 2000, max_bytes: int = 8 << 20) -> None:
        self.max_line_chars = max_line_chars
        self.max_bytes = max_bytes

    @property
    def schema(self) -> ToolSchema:
        return READ_FILE_SCHEMA

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        path = string_arg(arguments, "path")
        offset = int_arg(arguments, "offset", default=1, minimum=1)
        limit = int_arg(arguments, "limit", default=500, minimum=1, maximum=2000)
        window = await self._window(slot, path, offset, limit)
        if isinstance(window, ToolResult):
            return window
        if window.binary:
            return _error(f"{path} looks like a binary file; use the terminal to inspect it")
        chosen = window.lines
        total = window.total_lines
        if not chosen and total:
            return _error(f"offset {offset} is past the end of {path} ({total} lines)")
        width = len(str(offset + len(chosen)))
        rendered = [
            f"{n:>{width}}|{line[: self.max_line_chars]}"
            for n, line in enumerate(chosen, start=offset)
        ]
        body = "\n".join(rendered)
        last = offset + len(chosen) - 1
        if total is None:
            body += f"\n\n[showing lines {offset}-{last} of a {window.size} byte file; "
            body += f"use offset={last + 1} to read more]"
        elif last < total:
            body += (
                f"\n\n[showing lines {offset}-{last} of {total}; "
                f"use offset={last + 1} to read more]"
            )
        return ToolResult(
            content=body,
            metadata={"path": path, "total_lines": total, "offset": offset, "lines": len(chosen)},
        )

    async def _window(
        self, slot: Slot, path: str, offset: int, limit: int
    ) -> TextWindow | ToolResult:
        if not isinstance(slot, WindowedFiles):  # backends without ranged reads: capped read
            text = await _read_text(slot, path, self.max_bytes)
            if isinstance(text, ToolResult):
                return text
            return _window_from_text(text, offset, limit)
        try:
            return await slot.read_window(path, offset, limit, self.max_line_chars * 4)
        except (OSError, SandboxError) as exc:
            return _file_error(path, exc)


class WriteFileTool:
    """Writes ``content`` (UTF-8) to ``path``, creating parent directories."""

    @property
    def schema(self) -> ToolSchema:
        return WRITE_FILE_SCHEMA

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        path = string_arg(arguments, "path")
        data = string_arg(arguments, "content").encode("utf-8")
        try:
            await slot.write_file(path, data)
        except (OSError, SandboxError) as exc:
            return _file_error(path, exc)
        return ToolResult(
            content=json.dumps({"path": path, "bytes_written": len(data)}),
            metadata={"path": path, "bytes_written": len(data)},
        )


class PatchTool:
    """Replaces ``old_string`` by ``new_string`` in ``path``; returns a unified diff."""

    @property
    def schema(self) -> ToolSchema:
        return PATCH_SCHEMA

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        mode = string_arg(arguments, "mode", default="replace")
        if mode != "replace":
            return _error(f"patch mode {mode!r} is not supported; use mode='replace'")
        path = string_arg(arguments, "path")
        old = string_arg(arguments, "old_string")
        new = string_arg(arguments, "new_string")
        replace_all = bool_arg(arguments, "replace_all", default=False)
        if not old:
            return _error("old_string must not be empty")
        text = await _read_text(slot, path, MAX_PATCH_BYTES)
        if isinstance(text, ToolResult):
            return text
        count = text.count(old)
        if count == 0:
            return _error(f"old_string not found in {path}; read the file and copy it exactly")
        if count > 1 and not replace_all:
            return _error(
                f"old_string occurs {count} times in {path}; add surrounding context to make it "
                "unique, or pass replace_all=true"
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        try:
            await slot.write_file(path, updated.encode("utf-8"))
        except (OSError, SandboxError) as exc:
            return _file_error(path, exc)
        diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                updated.splitlines(keepends=True),
                fromfile=f"a/{path.lstrip('/')}",
                tofile=f"b/{path.lstrip('/')}",
            )
        )
        return ToolResult(
            content=json.dumps(
                {"path": path, "replacements": count if replace_all else 1, "diff": diff},
                ensure_ascii=False,
            ),
            metadata={"path": path, "replacements": count if replace_all else 1},
        )
