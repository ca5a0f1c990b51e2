"""Running commands in a slot of a container-like host (a Docker container, a Modal sandbox).

Such hosts only offer "run this argv in that directory": the slot's isolation from its own
leftovers comes from :data:`EXEC_WRAPPER`, which runs the command under GNU ``timeout`` (exit
124 on timeout) with a per-slot marker in its environment, and from :func:`reset_script`,
which kills whatever still carries the marker (or works in the slot) and empties the
workspace. Paths are confined to the workspace lexically by :func:`resolve_in_workspace`.
"""

from __future__ import annotations

import posixpath
import shlex

from hermes_protocols import WorkspaceEscape

TIMEOUT_EXIT = 124
"""The exit code GNU ``timeout`` (and every backend) reports for a command that timed out."""

# Runs a command under GNU timeout (its own process group) with a marker in its environment;
# afterwards kills the group and every process still carrying the marker (including ones that
# left the group with setsid), so nothing outlives the command. GNU timeout exits 124 when the
# command ended on SIGTERM but 137 when it had to be SIGKILLed (it ignored SIGTERM, or a fork
# bomb kept the group busy): the wrapper reports both as 124 when the time limit had passed,
# measured with bash's own clock (no fork needed after the command, even under a pids limit).
EXEC_WRAPPER = r"""exec 3<&0
t0=${EPOCHREALTIME/[.,]/}
HERMES_SLOT_MARK="$1" timeout -k 2 "$2" bash -c "$4" <&3 3<&- &
pid=$!
wait "$pid"; rc=$?
t1=${EPOCHREALTIME/[.,]/}
kill -9 -- "-$pid" 2>/dev/null
for f in $(grep -lzxF "HERMES_SLOT_MARK=$1" /proc/[0-9]*/environ 2>/dev/null); do
  p=${f#/proc/}; kill -9 "${p%/environ}" 2>/dev/null
done
if [ "$rc" -eq 137 ] && [ -n "$t0" ] && [ $((t1 - t0)) -ge "$3" ]; then rc=124; fi
exit "$rc"
"""


def exec_argv(marker: str, command: str, timeout: float) -> tuple[str, ...]:
    """argv running ``command`` under :data:`EXEC_WRAPPER` (bash >= 5 and coreutils needed)."""
    limit_us = str(int(timeout * 1_000_000))
    return ("bash", "-c", EXEC_WRAPPER, "hermes-exec", marker, f"{timeout:.3f}", limit_us, command)


def reset_script(workspace: str, marker: str) -> str:
    """Shell that kills the slot's processes (by marker or cwd) and empties its workspace."""
    ws, mark = shlex.quote(workspace), shlex.quote(f"HERMES_SLOT_MARK={marker}")
    return (
        f"for f in $(grep -lzxF {mark} /proc/[0-9]*/environ 2>/dev/null; "
        f"find /proc/[0-9]*/cwd -maxdepth 0 \\( -lname {ws} -o -lname {ws}/'*' \\) "
        '2>/dev/null); do p=${f#/proc/}; kill -9 "${p%%/*}" 2>/dev/null; done; '
        # Without CAP_DAC_OVERRIDE even root needs u+rwx on a directory to empty it.
        f"chmod -R u+rwx {ws} 2>/dev/null; rm -rf {ws} && mkdir -p {ws}"
    )


def resolve_in_workspace(workspace: str, path: str, *, allow_root: bool = False) -> str:
    """``path`` inside ``workspace``, lexically; ``..`` or outside absolute paths fail.

    Symlinks are not followed here (the host resolves them before touching a file).
    """
    full = posixpath.normpath(posixpath.join(workspace, path))
    if full == workspace and allow_root:
        return full
    if not full.startswith(workspace + "/"):
        raise WorkspaceEscape(f"{path!r} is outside the slot workspace {workspace}")
    return full
