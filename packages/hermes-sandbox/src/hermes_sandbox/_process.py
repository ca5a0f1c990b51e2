"""Signal a process group (every sandbox and agent runs in a session of its own)."""

from __future__ import annotations

import contextlib
import os
import signal


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid``; a group that is already gone is fine.

    Only for a group whose leader this process has not reaped yet: pids are reused.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
