"""The environment check finds each mistake an environment can make, on a real sandbox.

``BROKEN`` is a plugin file (outside any package, loaded by path) holding one good environment
and one broken variant per check; each variant must fail exactly the check it breaks. The
command line is run as a user runs it: exit 0 when all passed, 1 on a failure, 2 on a bad ENV.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from hermes_rollouts import Status, check_environment
from hermes_rollouts.check_items import ITEM_DATA, ITEMS, PROMPTS, SPLITS
from hermes_rollouts.check_setup import SETUP
from hermes_rollouts.env_check import (
    IDLE,
    INFRA,
    ORACLE,
    RECORDS,
    REWARDS,
)
from hermes_rollouts.leaks import Snapshot, leftovers
from hermes_sandbox import LocalBackend, LocalConfig
from hermes_sandbox.factory import SandboxSpec

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

BROKEN = '''
import itertools, random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hermes_protocols import AgentResult, FailureKind, Item, Message, RewardContext, Score, Slot


class Good:
    """Write DONE to out.txt."""

    name = "good"
    toolsets = ("terminal",)

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        for n in itertools.count():
            yield Item(id=f"{split}-{seed}-{n}", data={"n": n}, split=split)

    def prompt(self, item: Item) -> Sequence[Message]:
        return [Message.user("Write DONE to out.txt.")]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        await slot.write_file("task.txt", b"write DONE to out.txt\\n")
        return {"n": item.data["n"]}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        try:
            ok = (await ctx.read_file("out.txt")).strip() == b"DONE"
        except FileNotFoundError:
            ok = False
        return Score(reward=float(ok), failure=None if ok else FailureKind.MODEL)

    def oracle_solution(self, item: Item) -> str:
        return "echo DONE > out.txt"


class Nondeterministic(Good):
    def items(self, *, seed, split="train"):
        for n in itertools.count():
            yield Item(id=f"{split}-{random.random()}", data={"n": n}, split=split)


class DuplicateIds(Good):
    def items(self, *, seed, split="train"):
        for n in itertools.count():
            yield Item(id=f"{split}-{n % 5}", data={"n": n}, split=split)


class LeakySplits(Good):
    def items(self, *, seed, split="train"):
        start = 0 if split == "train" else 16
        for n in itertools.count(start):
            yield Item(id=f"item-{n}", data={"n": n}, split=split)


class SetData(Good):
    def items(self, *, seed, split="train"):
        for n in itertools.count():
            yield Item(id=f"{split}-{n}", data={"n": n, "tags": {"a"}}, split=split)


class NoPrompt(Good):
    def prompt(self, item):
        return [Message.system("You are helpful.")]


class RandomSetup(Good):
    async def setup_workspace(self, item, slot):
        await slot.write_file("noise.txt", str(random.random()).encode())
        return {}


class WrongOracle(Good):
    def oracle_solution(self, item):
        return "echo NOPE > out.txt"


class GenerousVerifier(Good):
    async def verify(self, item, result, ctx):
        return Score(reward=1.0)


class BigReward(Good):
    async def verify(self, item, result, ctx):
        score = await super().verify(item, result, ctx)
        return Score(reward=score.reward * 2.0)


class BytesMetadata(Good):
    async def setup_workspace(self, item, slot):
        await super().setup_workspace(item, slot)
        return {"blob": b"\\x00\\x01"}


class SwallowsSandboxErrors(Good):
    async def verify(self, item, result, ctx):
        try:
            ok = (await ctx.read_file("out.txt")).strip() == b"DONE"
        except Exception:
            ok = False
        return Score(reward=float(ok))


class NoOracle(Good):
    oracle_solution = None
'''

#: checks a variant fails besides its own: the oracle's reward is 2.0, a set cannot be recorded
ALSO_FAILS = {"BigReward": (ORACLE,), "SetData": (RECORDS,)}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plugins") / "broken_envs.py"
    path.write_text(textwrap.dedent(BROKEN))
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _check(plugin: Path, attr: str) -> dict[str, tuple[Status, str]]:
    report = await check_environment(f"{plugin}:{attr}", sandbox=SandboxSpec(kind="local"), items=2)
    return {r.name: (r.status, r.detail) for r in report.results}


async def test_a_good_environment_passes_every_check(plugin: Path) -> None:
    report = await check_environment(f"{plugin}:Good", sandbox=SandboxSpec(kind="local"))
    assert report.passed, report.table()
    assert all(r.status is Status.PASS for r in report.results), report.table()
    assert report.table().splitlines()[-1].startswith("PASSED: 14 passed, 0 failed")


@pytest.mark.parametrize(
    ("attr", "row", "expected"),
    [
        ("Nondeterministic", ITEMS, "two calls with seed 0 differ at item 0"),
        ("DuplicateIds", ITEMS, "id 'train-0' appears twice"),
        ("LeakySplits", SPLITS, "16 of the first 32 test ids are train ids too"),
        ("SetData", ITEM_DATA, "item 'train-0' data.tags: set"),
        ("NoPrompt", PROMPTS, "has no non-empty user message"),
        ("RandomSetup", SETUP, "two setups left different files"),
        ("WrongOracle", ORACLE, "scored 0.0"),
        ("GenerousVerifier", IDLE, "scored 1.0"),
        ("BigReward", REWARDS, "reward 2.0 is outside [0, 1]"),
        ("BytesMetadata", RECORDS, "record.metadata.workspace.blob: bytes"),
        ("SwallowsSandboxErrors", INFRA, "verify returned reward 0.0 when the sandbox"),
    ],
)
async def test_each_mistake_fails_its_own_check(
    plugin: Path, attr: str, row: str, expected: str
) -> None:
    rows = await _check(plugin, attr)
    status, detail = rows[row]
    assert status is Status.FAIL, rows
    assert expected in detail, detail
    failed = {name for name, (status, _) in rows.items() if status is Status.FAIL}
    assert failed == {row, *ALSO_FAILS.get(attr, ())}, rows


async def test_without_an_oracle_the_oracle_check_is_skipped(plugin: Path) -> None:
    rows = await _check(plugin, "NoOracle")
    assert rows[ORACLE][0] is Status.SKIP
    assert all(status is not Status.FAIL for status, _ in rows.values()), rows


async def test_the_leak_probe_finds_host_directories_and_processes(tmp_path: Path) -> None:
    """What the pool's name owns and what this process started since count; another pool's
    directory and the children of a process that was already running (a server) do not."""
    backend = LocalBackend(LocalConfig(root_dir=str(tmp_path / "hosts")))
    server = await anyio.open_process(
        ["sh", "-c", "sleep 0.3; sleep 30; true"], start_new_session=True
    )
    before = Snapshot.take()
    (tmp_path / "hosts" / "leaky--h0").mkdir(parents=True)
    (tmp_path / "hosts" / "other-pool--h0").mkdir()
    sleeper = await anyio.open_process(["sleep", "31"], start_new_session=True)
    await anyio.sleep(1.0)  # the server has started its own child by now
    try:
        found = await leftovers(backend, "leaky", before)
    finally:
        for process in (sleeper, server):
            os.killpg(process.pid, signal.SIGKILL)
            await process.aclose()
    assert found == [str(tmp_path / "hosts" / "leaky--h0"), f"process {sleeper.pid}: sleep 31"]
    assert await leftovers(backend, "leaky-2", before) == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "hermes-envs"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, env=dict(os.environ)
    )


def test_the_command_line_exit_codes(plugin: Path) -> None:
    good = _cli("check", f"{plugin}:Good", "--sandbox", "local", "--items", "1")
    assert good.returncode == 0, good.stderr
    assert "PASSED: 14 passed" in good.stdout
    assert "injected" not in good.stderr  # the fault the check injects is not a warning
    bad = _cli("check", f"{plugin}:BytesMetadata", "--sandbox", "local", "--items", "1")
    assert bad.returncode == 1, bad.stderr
    assert f"FAIL  {RECORDS}" in bad.stdout
    assert bad.stdout.splitlines()[-1].startswith("FAILED: 13 passed, 1 failed")
    wrong = _cli("check", f"{plugin}:Nope", "--sandbox", "local")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().startswith("hermes-envs: ENV: ")
    assert "has no attribute 'Nope'" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1
    alias = _cli("check", f"{plugin}:Good", "--sandbox-image-alias", "ubuntu")
    assert alias.returncode == 2
    assert "takes NAME=IMAGE" in alias.stderr
    listed = _cli("list")
    assert listed.returncode == 0
    assert "endless_terminals" in listed.stdout
