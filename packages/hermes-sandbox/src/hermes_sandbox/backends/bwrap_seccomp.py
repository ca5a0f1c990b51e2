"""The seccomp filters of bwrap slots, compiled with libseccomp (through ``pyseccomp``).

Every call agents never need is refused with ``EPERM``: kernel modules and kexec, keyrings,
BPF and perf, io_uring (a large, often-exploited kernel surface that also bypasses per-syscall
filtering), mounting and swap, clock and time setting, reboot, accounting, quotas, raw I/O
ports, ``open_by_handle_at`` (a known container escape), ``userfaultfd`` (a kernel-exploit
helper) and ``personality`` changes; netlink sockets other than ``NETLINK_ROUTE`` (which
``ip``, ``getifaddrs`` and glibc's resolver use) are refused too (audit, netfilter, xfrm, udev
events, sock_diag, generic netlink...). System calls of another ABI (i386, x32) kill the process
(libseccomp's default bad-architecture action).

``ptrace`` stays allowed, deliberately: agents debug their own programs (gdb, strace), and
every command runs in its own pid namespace, so the only processes it can see, and so trace,
are its own command's; the executor agent and other commands (of this slot or any other) are
outside it. Nested user namespaces are refused by bwrap's ``--disable-userns``, not here.

Two programs are written: the *command* filter (all of the above), which the executor loads for
every command, and the *agent* filter, the same without ``mount`` (the agent mounts a fresh
``/proc`` for each command's pid namespace before it loads the command filter). Filters stack,
so a command runs under both.
"""

from __future__ import annotations

import errno
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
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
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


AGENT_NEEDS = frozenset({"mount"})
"""Calls the agent itself makes that its commands' filter refuses."""

AF_NETLINK = 16
NETLINK_ROUTE = 0


def compile_filter(*, allow: frozenset[str] = frozenset()) -> bytes:
    """The BPF program (raw ``sock_filter`` array) refusing ``BLOCKED_SYSCALLS`` but ``allow``,
    and netlink sockets other than ``NETLINK_ROUTE``."""
    try:
        import pyseccomp  # type: ignore[import-untyped]
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 missing
        raise IsolationUnavailable(
            f"cannot load libseccomp ({exc}); install Debian's libseccomp2"
        ) from exc
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in BLOCKED_SYSCALLS:
        if name in allow:
            continue
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # unknown to this libseccomp: skip it
            continue
    rules.add_rule(
        pyseccomp.ERRNO(errno.EPERM),
        "socket",
        pyseccomp.Arg(0, pyseccomp.EQ, AF_NETLINK),
        pyseccomp.Arg(2, pyseccomp.NE, NETLINK_ROUTE),
    )
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def compile_filters() -> tuple[bytes, bytes]:
    """The (agent, command) programs."""
    return compile_filter(allow=AGENT_NEEDS), compile_filter()
