"""The gvisor backend without runsc: its OCI spec, budget, and failing at start with why.

Real gVisor sandboxes run in the conformance suite and ``test_container_hardening.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hermes_protocols import ConfigError, IsolationUnavailable
from hermes_sandbox import PoolConfig, ResourceLimits, SandboxPool
from hermes_sandbox.backends.agent_host import SlotPaths
from hermes_sandbox.backends.gvisor import GvisorBackend, GvisorConfig
from hermes_sandbox.backends.gvisor_spec import oci_spec
from hermes_sandbox.budget import MachineBudget

PATHS = SlotPaths("/srv/h/slots/0", "/srv/h/ctl/0")


def test_the_spec_runs_the_agent_on_a_read_only_root_with_only_the_slot_writable() -> None:
    limits = ResourceLimits(slot_memory_bytes=1 << 30, slot_processes=64, slot_cpus=0.5)
    spec = oci_spec(
        rootfs="/srv/rootfs",
        workspace="/workspace",
        paths=PATHS,
        agent="/srv/.bin/hermes-exec-1",
        path_env="/usr/bin:/bin",
        limits=limits,
        cgroups_path="hermes-sandbox-1/h/h-0-abc",
    )
    assert spec["root"] == {"path": "/srv/rootfs", "readonly": True}
    process = spec["process"]
    assert process["args"] == ["/.hermes/exec", "--drop-caps", "--connect", "/.hermes/ctl/s"]
    assert process["noNewPrivileges"] is True
    assert process["capabilities"]["ambient"] == process["capabilities"]["inheritable"] == []
    assert set(process["capabilities"]["bounding"]) == {
        "CAP_SETUID",
        "CAP_SETGID",
        "CAP_SETPCAP",
        "CAP_KILL",
    }
    binds = {m["destination"]: m for m in spec["mounts"] if m["type"] == "bind"}
    assert binds["/workspace"]["source"] == "/srv/h/slots/0/workspace"
    assert binds["/tmp"]["source"] == binds["/var/tmp"]["source"] == "/srv/h/slots/0/tmp"
    assert binds["/dev/shm"]["source"] == "/srv/h/slots/0/shm"
    assert "ro" in binds["/.hermes/ctl"]["options"]
    assert "ro" in binds["/.hermes/exec"]["options"]
    assert all("rw" not in m["options"] for d, m in binds.items() if d.startswith("/.hermes"))
    namespaces = {n["type"] for n in spec["linux"]["namespaces"]}
    assert namespaces == {"pid", "network", "ipc", "uts", "mount"}
    resources = spec["linux"]["resources"]
    assert resources["memory"] == {"limit": 1 << 30, "swap": 1 << 30}
    assert resources["pids"] == {"limit": 64}
    assert resources["cpu"] == {"quota": 50_000, "period": 100_000}


def test_slot_limits_are_fitted_to_the_machine() -> None:
    backend = GvisorBackend(GvisorConfig(rootfs="/srv/rootfs"))
    notes = backend.fit_budget(MachineBudget(memory_bytes=8 << 30, cpus=2), 16)
    assert backend.limits.slot_memory_bytes == (8 << 30) // 16
    assert backend.limits.disk_bytes is not None
    assert backend.limits.disk_bytes <= (8 << 30) // 16
    assert any("slot_memory_bytes" in note for note in notes)


def test_a_relative_rootfs_is_refused() -> None:
    with pytest.raises(ConfigError, match="absolute"):
        GvisorConfig(rootfs="rootfs")


@pytest.mark.anyio
@pytest.mark.skipif(os.geteuid() != 0, reason="without root the backend refuses earlier")
async def test_a_pool_without_runsc_fails_at_its_start_saying_why(tmp_path: Path) -> None:
    config = GvisorConfig(rootfs=str(tmp_path), runsc=str(tmp_path / "no-runsc"))
    with anyio.fail_after(30), pytest.raises(IsolationUnavailable, match="no-runsc"):
        async with SandboxPool(GvisorBackend(config), PoolConfig(name="gv-missing")):
            pass
