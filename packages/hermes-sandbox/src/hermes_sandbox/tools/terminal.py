"""The ``terminal`` tool: run a shell command in the slot; ``cd`` and exports persist.

The shell state (working directory and exported variables) of a trajectory is saved in the
workspace under ``.hermes/terminal`` after every command and restored before the next one, so
it needs no state in Python and survives on every backend. The state is written to new files
and renamed into place, so a save that fails (a full disk) keeps the previous state whole, and
the result says the command's ``cd``/``export`` were lost instead of dropping them silently.
Output (stdout and stderr merged) is capped with head + tail and a notice; a timeout kills the
whole process group (exit code 124).
"""

from __future__ import annotations

import json
import posixpath
import secrets
import shlex
from collections.abc import Mapping
from typing import Any

from hermes_protocols import Slot, ToolResult, ToolSchema

from hermes_sandbox.tools._args import cap_text, int_arg, optional_string_arg, string_arg

STATE_DIR = ".hermes/terminal"

TERMINAL_SCHEMA = ToolSchema(
    name="terminal",
    description=(
        "Execute a shell command in the sandbox workspace and return its output. The working "
        "directory and exported environment variables persist between calls. Long outputs "
        "are truncated (head and tail kept). Use 'timeout' for long-running commands; "
        "processes started in the background do not outlive the command."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "description": "Timeout in seconds (default 60); on timeout the command is "
                "killed and exit code 124 is reported",
            },
            "workdir": {
                "type": "string",
                "description": "Working directory for this command, relative to the "
                "workspace or absolute (default: the session's current directory, initially "
                "the workspace)",
            },
        },
        "required": ["command"],
    },
)


STATE_LOST = (
    "the command ran, but its working directory and exports could not be saved (the disk is "
    "full?): the next command starts from the previous state; free space, then repeat cd/export"
)


def _script(state_dir: str, command: str, workdir: str | None, lost_marker: str) -> str:
    state = shlex.quote(state_dir)
    lines = [
        "exec 2>&1",
        f"__HERMES_TERMINAL_STATE={state}",
        'if [ -f "$__HERMES_TERMINAL_STATE/env" ]; then . "$__HERMES_TERMINAL_STATE/env"; fi '
        ">/dev/null 2>&1",
        'if [ -f "$__HERMES_TERMINAL_STATE/cwd" ]; then IFS= read -r __hermes_cwd '
        '< "$__HERMES_TERMINAL_STATE/cwd" && cd "$__hermes_cwd" 2>/dev/null; fi',
        "__hermes_save() { __rc=$?; __s=$__HERMES_TERMINAL_STATE; "
        'if { { [ -d "$__s" ] || mkdir -p "$__s"; } && pwd > "$__s/cwd.new" && '
        'export -p > "$__s/env.new" && mv -f "$__s/cwd.new" "$__s/cwd" && '
        'mv -f "$__s/env.new" "$__s/env"; } 2>/dev/null; then :; '
        f'else rm -f "$__s/cwd.new" "$__s/env.new" 2>/dev/null; echo {lost_marker}; fi; '
        "exit $__rc; }",
        "trap __hermes_save EXIT",
    ]
    if workdir is not None:
        lines.append(f"cd {shlex.quote(workdir)} || exit 1")
    lines.append(command)
    return "\n".join(lines) + "\n"


class TerminalTool:
    """Runs ``command`` through ``slot.exec`` with persistent ``cd``/``export`` state."""

    def __init__(
        self, *, default_timeout: int = 60, max_timeout: int = 3600, max_output_chars: int = 50_000
    ) -> None:
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.max_output_chars = max_output_chars

    @property
    def schema(self) -> ToolSchema:
        return TERMINAL_SCHEMA

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        command = string_arg(arguments, "command")
        timeout = int_arg(
            arguments,
            "timeout",
            default=self.default_timeout,
            minimum=1,
            maximum=self.max_timeout,
        )
        workdir = optional_string_arg(arguments, "workdir")
        state_dir = posixpath.join(slot.workspace, STATE_DIR)
        if workdir is not None:
            workdir = posixpath.join(slot.workspace, workdir)
        marker = f"hermes-terminal-state-lost-{secrets.token_hex(8)}"
        script = _script(state_dir, command, workdir, marker)
        result = await slot.exec(script, timeout=timeout)
        merged = result.stdout + result.stderr
        lost = marker in merged
        output, capped = cap_text(merged.replace(f"{marker}\n", ""), self.max_output_chars)
        error = None
        if result.timed_out:
            error = f"command timed out after {timeout}s and was killed (exit code 124)"
        elif lost:
            error = STATE_LOST
        payload = {"output": output, "exit_code": result.exit_code, "error": error}
        return ToolResult(
            content=json.dumps(payload, ensure_ascii=False),
            is_error=error is not None,
            metadata={
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "truncated": capped or result.truncated,
                "duration_s": result.duration_s,
            },
        )
