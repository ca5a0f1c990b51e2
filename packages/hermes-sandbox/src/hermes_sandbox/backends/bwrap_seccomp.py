"""The seccomp filter of bwrap slots, compiled with libseccomp (through ``pyseccomp``).

Every call agents never need is refused with ``EPERM``: kernel modules and kexec, keyrings,
BPF and perf, mounting and swap, clock and time setting, reboot, accounting, quotas, raw I/O
ports, ``open_by_handle_at`` (a known container escape), ``userfaultfd`` (a kernel-exploit
helper) and ``personality`` changes. ``ptrace`` stays allowed: agents debug their own programs
(gdb, strace) and the pid namespace hides every process outside the sandbox. Nested user
namespaces are refused by bwrap's ``--disable-userns``, not here. System calls of another ABI
(i386, x32) kill the process (libseccomp's default bad-architecture action).
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile

from hermes_protocols import IsolationUnavailable

BLOCKED_SYSCALLS = (
    "acct",
    "add_key",
    "adjtimex",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "personality",
    "pivot_root",
    "quotactl",
    "reboot",
    "request_key",
    "setdomainname",
    "sethostname",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "umount2",
    "userfaultfd",
    "vhangup",
)


def compile_filter() -> bytes:
    """The BPF program (as bwrap's ``--seccomp FD`` reads it) refusing ``BLOCKED_SYSCALLS``."""
    try:
        import pyseccomp  # type: ignore[import-untyped]
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 missing
        raise IsolationUnavailable(
            f"cannot load libseccomp ({exc}); install Debian's libseccomp2"
        ) from exc
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in BLOCKED_SYSCALLS:
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # unknown to this libseccomp: skip it
            continue
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def write_filter(directory: str) -> str:
    """Write the compiled filter under ``directory`` (world-readable, keyed by content)."""
    program = compile_filter()
    path = os.path.join(directory, f"seccomp-{hashlib.sha256(program).hexdigest()[:16]}.bpf")
    if not os.path.isfile(path):
        os.makedirs(directory, mode=0o755, exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as f:
            f.write(program)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    return path
