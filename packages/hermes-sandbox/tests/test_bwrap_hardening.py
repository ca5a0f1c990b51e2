"""Issue 15 findings 3 and 5 and issue 24 findings 8 and 9, from inside a bwrap slot: seccomp,
no nested user namespaces, a per-slot disk limit holding /tmp and /dev/shm, and limits that fit
the machine."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hermes_sandbox import BwrapBackend, BwrapConfig, PoolConfig, ResourceLimits, SandboxPool
from hermes_sandbox.backends.cgroups import controller_bases, subtree_for
from hermes_sandbox.tools import WriteFileTool

pytestmark = pytest.mark.anyio

# x86-64 numbers.
_SYSCALLS = {
    "bpf": 321,
    "keyctl": 250,
    "init_module": 175,
    "kexec_load": 246,
    "mount": 165,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}
_NETLINK = (
    'python3 -c "import socket,sys\n'
    "try: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, int(sys.argv[1])); print('open')\n"
    'except OSError as e: print(e.errno)" '
)
_CALL = (
    'python3 -c "import ctypes,sys; libc=ctypes.CDLL(None, use_errno=True); '
    'r=libc.syscall(int(sys.argv[1]),0,0,0,0,0); print(r, ctypes.get_errno())" '
)


def _config(root: Path, **fields: object) -> BwrapConfig:
    return BwrapConfig(root_dir=str(root / "bwrap"), **fields)  # type: ignore[arg-type]


async def _run(config: BwrapConfig, *commands: str) -> list[tuple[int, str, str]]:
    out = []
    async with SandboxPool(BwrapBackend(config), PoolConfig(name="hard", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        for command in commands:
            result = await slot.exec(command, timeout=60)
            out.append((result.exit_code, result.stdout.strip(), result.stderr.strip()))
        await pool.release(slot)
    return out


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86-64")
async def test_seccomp_blocks_what_agents_never_need(sandbox_root: Path) -> None:
    commands = [_CALL + str(number) for number in _SYSCALLS.values()]
    commands.append("grep -E '^Seccomp:' /proc/self/status")
    filtered = await _run(_config(sandbox_root), *commands)
    for (code, out, err), name in zip(filtered, _SYSCALLS, strict=False):
        assert code == 0, err
        assert out == "-1 1", f"{name} was not refused with EPERM: {out}"
    assert filtered[-1][1].split() == ["Seccomp:", "2"]
    # netlink: NETLINK_ROUTE (ip, getifaddrs, the resolver) stays; audit (9), sock_diag (4),
    # netfilter (12), udev events (15) and generic (16) are refused.
    netlink = await _run(_config(sandbox_root), *(_NETLINK + str(p) for p in (0, 9, 4, 12, 15, 16)))
    assert [out for _, out, _ in netlink] == ["open", "1", "1", "1", "1", "1"]
    # ptrace stays (decided): debuggers work on the command's own processes.
    if shutil.which("strace"):
        ((code, _, err),) = await _run(_config(sandbox_root), "strace -f -o /dev/null true")
        assert code == 0, err
    # Without the filter the same calls reach the kernel (and fail differently, or not at all).
    plain = await _run(_config(sandbox_root, seccomp=False), _CALL + str(_SYSCALLS["bpf"]))
    assert plain[0][1] != "-1 1"
    shutil.rmtree(sandbox_root / "bwrap")


async def test_nested_user_namespaces_are_disabled(sandbox_root: Path) -> None:
    (code, out, err), (_, ok, _) = await _run(
        _config(sandbox_root), "unshare -Ur id -u", "echo still-fine"
    )
    assert code != 0
    assert out != "0"
    assert "unshare failed" in err
    assert ok == "still-fine"
    ((code, out, _),) = await _run(_config(sandbox_root, disable_userns=False), "unshare -Ur id -u")
    assert (code, out) == (0, "0")  # what the issue reproduced, now opt-in only
    shutil.rmtree(sandbox_root / "bwrap")


@pytest.mark.skipif(os.geteuid() != 0, reason="size-limited workspaces are mounted as root only")
async def test_disk_limit_stops_a_slot_with_a_clear_error(sandbox_root: Path) -> None:
    limits = ResourceLimits(disk_bytes=64 << 20)
    config = _config(sandbox_root, limits=limits)
    async with SandboxPool(BwrapBackend(config), PoolConfig(name="disk", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        big = await slot.exec("dd if=/dev/zero of=big bs=1M count=200 status=none", timeout=60)
        assert big.exit_code != 0
        assert "No space left on device" in big.stderr
        assert "disk limit (0.1 GiB for the workspace" in big.stderr
        used = await slot.exec("du -sm big | cut -f1", timeout=30)
        assert int(used.stdout) <= 64
        tmp = await slot.exec("dd if=/dev/zero of=/tmp/big bs=1M count=200 status=none", timeout=60)
        assert tmp.exit_code != 0
        assert "No space left on device" in tmp.stderr
        written = await WriteFileTool()(slot, {"path": "more.txt", "content": "x" * (1 << 20)})
        assert written.is_error
        assert "disk limit is reached" in json.loads(written.content)["error"]
        await pool.release(slot)  # the reset gives a fresh, empty, equally limited workspace
        again = await pool.acquire("t")
        fresh = await again.exec("ls -A | wc -l; df -m . | tail -1", timeout=30)
        count, df_line = fresh.stdout.splitlines()
        assert count == "0"
        assert df_line.split()[1] == "64"
        await pool.release(again)
    shutil.rmtree(sandbox_root / "bwrap")


# Issue 24 finding 8: a pool's slots fit the machine, CPU quotas, /dev/shm in the disk limit.


def _knob(root: Path, controller: str, slot_id: str, name: str) -> str:
    """A file of the cgroup of ``slot_id`` (``<host_id>/<index>``)."""
    base = controller_bases(subtree_for(str(root)))[controller]
    return Path(base, slot_id, name).read_text().strip()


_CGROUP_V1 = [f"/sys/fs/cgroup/{c}/cgroup.procs" for c in ("memory", "cpu")]


@pytest.mark.slow
@pytest.mark.skipif(
    os.geteuid() != 0 or not all(os.path.isfile(path) for path in _CGROUP_V1),
    reason="needs root and the cgroup v1 memory and cpu controllers (this machine's)",
)
async def test_a_pool_sets_slot_cgroups_within_its_budget_and_cpu_quota_binds(
    sandbox_root: Path,
) -> None:
    backend = BwrapBackend(
        BwrapConfig(root_dir=str(sandbox_root), limits=ResourceLimits(slot_cpus=0.05))
    )
    config = PoolConfig(name="budget", slots_per_host=4, max_hosts=8)
    async with SandboxPool(backend, config) as pool:
        slot = await pool.acquire("t")
        limit = int(_knob(sandbox_root, "memory", slot.slot_id, "memory.limit_in_bytes"))
        assert limit * 32 <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        assert _knob(sandbox_root, "cpu", slot.slot_id, "cpu.cfs_quota_us") == "5000"
        # Four burners want 4 CPUs; the slot gets 0.05 (even on a loaded machine, that binds).
        burn = await slot.exec(
            "TIMEFORMAT=%U; time (for i in 1 2 3 4; do timeout 1.5 bash -c 'while :; do :; done' "
            "& done; wait)",
            timeout=30,
        )
        assert float(burn.stderr.strip()) <= 0.05 * 1.5 * 3  # ~0.08 s of CPU, not up to 6 s
        lines = _knob(sandbox_root, "cpu", slot.slot_id, "cpu.stat").splitlines()
        stat = dict(line.split() for line in lines)
        assert int(stat["nr_throttled"]) > 0  # the kernel held the slot to its quota
        await pool.release(slot)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="size-limited slots are mounted as root only")
async def test_tmp_and_dev_shm_count_against_the_disk_limit(sandbox_root: Path) -> None:
    limits = ResourceLimits(disk_bytes=64 << 20)
    backend = BwrapBackend(BwrapConfig(root_dir=str(sandbox_root), limits=limits))
    async with SandboxPool(backend, PoolConfig(name="shm", slots_per_host=1)) as pool:
        slot = await pool.acquire("t")
        dd = "dd if=/dev/zero bs=1M status=none"
        shm = await slot.exec(f"{dd} of=/dev/shm/big count=300", timeout=60)
        assert "No space left on device" in shm.stderr
        dev = await slot.exec(f"{dd} of=/dev/big count=10", timeout=60)
        assert "Read-only file system" in dev.stderr
        await slot.exec("rm -f /dev/shm/big", timeout=30)
        split = await slot.exec(f"{dd} of=a count=40 && {dd} of=/tmp/b count=40", timeout=60)
        assert "No space left on device" in split.stderr  # one limit for all of them
        await pool.release(slot)
