"""The OCI runtime spec (``config.json``) of one gVisor slot sandbox.

The slot's process is ``hermes-exec`` as PID 1, the sandbox's root with only what it needs to
start its commands as the slot's unprivileged uid (with no capabilities and ``no_new_privs``)
and to kill them: gVisor lets a process kill its namespace's PID 1 when it may signal it, so
no command may; the root filesystem is read-only; the slot's host directories are bound at
the workspace, ``/tmp``, ``/var/tmp`` and ``/dev/shm``, its control directory and the agent
read-only; new pid, network (none), ipc, uts and mount namespaces of gVisor's own kernel; the
slot limits as the sandbox's cgroup resources.
"""

from __future__ import annotations

from typing import Any

from hermes_sandbox.backends.agent_host import AGENT_PATH, CONTROL_DIR, CONTROL_SOCKET, SlotPaths
from hermes_sandbox.limits import ResourceLimits

_CPU_PERIOD_US = 100_000
_AGENT_CAPABILITIES = ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL"]
"""What the agent needs to start commands as the slot's user and to kill them, in gVisor's
kernel (its commands keep none of them)."""


def _bind(source: str, target: str, *, readonly: bool = False) -> dict[str, Any]:
    options = ["rbind", "nosuid", "nodev", "ro" if readonly else "rw"]
    return {"destination": target, "type": "bind", "source": source, "options": options}


def _resources(limits: ResourceLimits) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits.slot_memory_bytes is not None:
        memory = limits.slot_memory_bytes
        resources["memory"] = {"limit": memory, "swap": memory}
    if limits.slot_processes is not None:
        resources["pids"] = {"limit": limits.slot_processes}
    if limits.slot_cpus is not None:
        quota = int(limits.slot_cpus * _CPU_PERIOD_US)
        resources["cpu"] = {"quota": quota, "period": _CPU_PERIOD_US}
    return resources


def oci_spec(
    *,
    rootfs: str,
    workspace: str,
    paths: SlotPaths,
    agent: str,
    path_env: str,
    limits: ResourceLimits,
    cgroups_path: str,
) -> dict[str, Any]:
    """The spec of a slot sandbox running the agent on ``paths``."""
    caps = _AGENT_CAPABILITIES
    return {
        "ociVersion": "1.0.2",
        "process": {
            "user": {"uid": 0, "gid": 0, "additionalGids": []},
            "args": [AGENT_PATH, "--drop-caps", "--connect", CONTROL_SOCKET],
            "env": [f"PATH={path_env}"],
            "cwd": "/",
            "noNewPrivileges": True,
            "capabilities": {
                **dict.fromkeys(("bounding", "effective", "permitted"), caps),
                "inheritable": [],
                "ambient": [],
            },
        },
        "root": {"path": rootfs, "readonly": True},
        "hostname": "sandbox",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]},
            _bind(paths.workspace, workspace),
            _bind(paths.tmp, "/tmp"),
            _bind(paths.tmp, "/var/tmp"),
            _bind(paths.shm, "/dev/shm"),
            _bind(paths.control_dir, CONTROL_DIR, readonly=True),
            _bind(agent, AGENT_PATH, readonly=True),
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
            "resources": _resources(limits),
            "cgroupsPath": cgroups_path,
        },
    }
