"""Conformance: isolation between slots, from the host and from the network.

Backends that do not isolate (``local``) skip these tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hermes_protocols import SlotPool

pytestmark = pytest.mark.anyio


@pytest.fixture
def isolated(backend_case: Any) -> None:
    if not backend_case.isolated:
        pytest.skip("this backend does not isolate commands")


@pytest.mark.usefixtures("isolated")
async def test_slots_cannot_see_each_other(make_pool: Callable[..., SlotPool]) -> None:
    name = f"secret-{uuid.uuid4().hex}"
    async with make_pool(slots_per_host=2, max_hosts=1) as pool:
        a = await pool.acquire("a")
        b = await pool.acquire("b")
        await a.write_file(name, b"only for a")
        found = await b.exec(
            f"find / -xdev -name {name} 2>/dev/null; find /workspace /tmp -name {name} 2>/dev/null",
            timeout=60,
        )
        assert found.stdout.strip() == ""
        assert (await b.exec("echo b > /tmp/scratch", timeout=20)).ok
        seen = await a.exec("cat /tmp/scratch", timeout=20)
        assert seen.exit_code != 0
        await pool.release(a)
        await pool.release(b)


@pytest.fixture
def home_entry() -> str | None:
    """A path inside the host user's home, if the home has any entry."""
    home = os.path.expanduser("~")
    entries = sorted(os.listdir(home)) if os.path.isdir(home) else []
    return os.path.join(home, entries[0]) if entries else None


@pytest.mark.usefixtures("isolated")
async def test_host_is_read_only_and_home_is_hidden(
    make_pool: Callable[..., SlotPool], home_entry: str | None
) -> None:
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        for target in ("/usr/hermes-probe", "/etc/hermes-probe", "/hermes-probe"):
            result = await slot.exec(f"touch {target}", timeout=20)
            assert result.exit_code != 0, target
            assert not await anyio.Path(target).exists()
        if home_entry is not None:
            probe = await slot.exec(f"ls -A {home_entry}", timeout=20)
            assert probe.exit_code != 0
        shadow = await slot.exec("cat /etc/shadow", timeout=20)
        assert shadow.exit_code != 0
        ident = await slot.exec("id -u; grep CapEff /proc/self/status", timeout=20)
        uid, caps = ident.stdout.split("\n")[:2]
        assert uid != "0"
        assert caps.split()[-1] == "0000000000000000"
        await pool.release(slot)


@pytest.mark.usefixtures("isolated")
async def test_no_network_unless_allowed(make_pool: Callable[..., SlotPool]) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("t")
        result = await slot.exec(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected", timeout=20)
        assert result.exit_code != 0
        assert "connected" not in result.stdout
        links = await slot.exec("cat /proc/net/dev", timeout=20)
        assert "eth" not in links.stdout
        await pool.release(slot)
