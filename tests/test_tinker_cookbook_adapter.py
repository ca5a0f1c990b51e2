"""The tinker-cookbook adapter (apps/tinker_cookbook_env) for real: group rollouts through
tinker-cookbook's own ``do_group_rollout`` in its venv (``.ci/tinker-cookbook.sh``), sampled by
our embedded model, tool calls run in bwrap slots. Every trajectory is token-exact (its
observations and actions concatenated are our ledger's ids; its action logprobs are the
sampler's and a teacher-forced recompute's), its reward is our verifier's (the commands the
model ran, replayed on a fresh slot of the item, score the same), an infrastructure failure
fails the run (never a 0.0 reward), and no slot is left behind."""

from __future__ import annotations

import json
import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil  # type: ignore[import-untyped]
import pytest
from hermes_envs import RolloutRunner, RunnerConfig, ScriptAgent
from hermes_protocols import Item
from hermes_rollouts import EnvironmentSpec, build_environment, item_from_json
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.factory import SandboxSpec, build_backend, build_toolsets

from tests.recompute import recompute
from tests.user_command import UserCommand, traversable_tmp

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = Path.home() / ".cache/hermes-rl/tinker-cookbook-0.6.1/venv/bin/python"
LAUNCHER = ROOT / "apps/tinker_cookbook_env/group_rollouts.py"
BROKEN = ROOT / "tests/broken_setup.py"
DOC = ROOT / "docs/tinker_cookbook.md"
SALES_REPORT = ROOT / "examples/sales_report/src/hermes_sales_report/__init__.py"
#: the run's logprobs against a teacher-forced recompute in a fresh process
LOGPROB_TOLERANCE = 1e-5
WRITE_WORD = json.dumps({"families": ["write_word"], "difficulties": [1]})
#: how long the run may take to clean up and exit after SIGINT
EXIT_S = 30

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def user_tmp() -> Iterator[Path]:
    yield from traversable_tmp()


def group_rollouts(
    cwd: Path, tmp: Path, args: list[str], *, launcher: Path = LAUNCHER
) -> UserCommand:
    """Start ``launcher`` as a user does (its own process group, bwrap hosts under ``tmp``)."""
    if not VENV_PYTHON.is_file():
        pytest.skip(
            f"tinker-cookbook is not installed at {VENV_PYTHON}: run .ci/tinker-cookbook.sh"
        )
    return UserCommand(str(VENV_PYTHON), [str(launcher), *args], cwd=cwd, tmp=tmp)


def doc_command(out: Path) -> list[str]:
    """docs/tinker_cookbook.md's command, its output file replaced."""
    (block,) = re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    lines = block.splitlines()
    assert lines[0] == "bash .ci/tinker-cookbook.sh"
    line = lines[1]
    assert line.startswith("~/.cache/hermes-rl/tinker-cookbook-0.6.1/venv/bin/python "), line
    line = line.replace("~/runs/tinker/groups.jsonl", str(out))
    return shlex.split(line)[2:]  # after the venv's python and the launcher


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_token_exact(record: dict[str, Any]) -> None:
    """Each observation extends the last observation and action; the last observation and
    action are our ledger's ids; the ledger's trainable ids are the actions, with their
    logprobs."""
    ledger = record["ledger"]
    sequence: list[int] = []
    actions: list[int] = []
    logprobs: list[float] = []
    for transition in record["transitions"]:
        assert transition["ob"][: len(sequence)] == sequence
        sequence = transition["ob"] + transition["ac"]
        actions += transition["ac"]
        logprobs += transition["logprobs"]
        assert len(transition["logprobs"]) == len(transition["ac"])
    assert sequence == ledger["ids"]
    trainable = [i for i, m in zip(ledger["ids"], ledger["mask"], strict=True) if m]
    assert trainable == actions
    assert [p for p, m in zip(ledger["logprobs"], ledger["mask"], strict=True) if m] == logprobs


async def recomputed(found: list[dict[str, Any]]) -> None:
    """Every action logprob is the embedded model's teacher-forced one (to the tolerance)."""
    # from the first action on (the logits of the prompt's positions are not needed)
    starts = [r["ledger"]["mask"].index(1) for r in found]
    rows = await recompute([(r["ledger"]["ids"], s) for r, s in zip(found, starts, strict=True)])
    for record, start, row in zip(found, starts, rows, strict=True):
        ledger = record["ledger"]
        assert start >= 1
        positions = [p for p, m in enumerate(ledger["mask"]) if m]
        for p in positions:
            want = row[p - start]
            assert abs(ledger["logprobs"][p] - want) < LOGPROB_TOLERANCE, (p, want)


async def replayed_rewards(
    environment: str, options: dict[str, Any], runs: list[tuple[Item, str]]
) -> list[float]:
    """Our verifier's reward for each ``(item, script)`` run on a fresh bwrap slot."""
    env = build_environment(EnvironmentSpec(name=environment, options=options))
    backend = build_backend(SandboxSpec(kind="bwrap"))
    terminal = [t for t in build_toolsets(30.0, 600.0) if t.name == "terminal"]
    rewards: list[float] = []
    async with SandboxPool(backend, PoolConfig(name="tc-replay", max_hosts=1)) as pool:
        for item, script in runs:
            runner = RolloutRunner(
                env,
                pool,
                ScriptAgent(script or "true"),
                terminal,
                config=RunnerConfig(max_attempts=1),
            )
            rollout = await runner.run_rollout(item, terminal)
            assert rollout.score is not None, rollout.failure
            rewards.append(rollout.score.reward)
    return rewards


@pytest.mark.timeout(900)
def test_the_docs_group_rollouts_are_token_exact_with_our_rewards(
    tmp_path: Path, user_tmp: Path
) -> None:
    out = tmp_path / "groups.jsonl"
    args = doc_command(out)
    command = group_rollouts(tmp_path, user_tmp, args)
    assert command.wait(timeout=600) == 0, command.output[-4000:]
    assert command.leftovers() == []
    found = records(out)
    assert len(found) == 2
    for record in found:
        check_token_exact(record)
        assert record["total_reward"] == record["verifier_reward"]
        assert record["verifier_reward"] in (0.0, 1.0)
    # one trajectory: a recompute of ~700 ids took 50 s on this machine under load
    anyio.run(recomputed, found[:1])
    options = json.loads(args[args.index("--env-options") + 1])
    runs = [(item_from_json(r["item"]), "\n".join(r["commands"])) for r in found]
    assert any(script for _, script in runs), "the model called no tool in any rollout"
    replays = anyio.run(replayed_rewards, "endless_terminals", options, runs)
    assert replays == [r["verifier_reward"] for r in found], runs


@pytest.mark.timeout(600)
def test_the_example_plugin_runs_from_a_file(tmp_path: Path, user_tmp: Path) -> None:
    out = tmp_path / "groups.jsonl"
    args = [
        *("--env", f"{SALES_REPORT}:SalesReportEnv", "--demonstration", "terminal"),
        *("--toolsets", "terminal", "--max-turns", "1", "--max-tokens", "48"),
        *("--context-tokens", "2048", "--out", str(out)),
    ]
    command = group_rollouts(tmp_path, user_tmp, args)
    assert command.wait(timeout=500) == 0, command.output[-4000:]
    assert command.leftovers() == []
    found = records(out)
    assert len(found) == 2
    for record in found:
        assert record["item"]["id"].startswith("sales")
        check_token_exact(record)
        assert record["total_reward"] == record["verifier_reward"]


@pytest.mark.timeout(600)
def test_an_infrastructure_failure_fails_the_group_not_a_zero(
    tmp_path: Path, user_tmp: Path
) -> None:
    out = tmp_path / "groups.jsonl"
    args = ["--env", f"{BROKEN}:BrokenSetup", "--context-tokens", "2048", "--out", str(out)]
    command = group_rollouts(tmp_path, user_tmp, args)
    assert command.wait(timeout=500) == 1, command.output[-4000:]
    assert command.leftovers() == []
    assert command.stderr.strip().splitlines()[-1] == (
        "error: hermes rollout infrastructure failure: setup: SandboxError: the host went away"
        " (after 1 attempts)"
    )
    assert not out.exists()


@pytest.mark.timeout(600)
def test_interrupted_mid_rollout_it_exits_and_leaves_no_sandbox(
    tmp_path: Path, user_tmp: Path
) -> None:
    """SIGINT once a rollout holds a slot: asyncio cancels ``do_group_rollout``, whose
    ``cleanup`` cancels our rollouts and waits for their slots' release."""
    args = [
        *("--env", "endless_terminals", "--env-options", WRITE_WORD, "--max-turns", "3"),
        *("--max-tokens", "64", "--context-tokens", "2048", "--out", str(tmp_path / "g.jsonl")),
    ]
    command = group_rollouts(tmp_path, user_tmp, args)

    def a_rollout_holds_a_slot() -> bool:
        hosts = [h for root in user_tmp.glob("hermes-sandbox-*/bwrap") for h in root.iterdir()]
        return any(not h.name.startswith(".") for h in hosts)

    command.wait_for(a_rollout_holds_a_slot, timeout=300, what="a rollout held a slot")
    [python] = psutil.Process(command.process.pid).children()
    python.send_signal(signal.SIGINT)
    assert command.wait(timeout=EXIT_S) == 128 + signal.SIGINT, command.output[-4000:]
    assert command.leftovers(settle_s=10) == []
    assert not (tmp_path / "g.jsonl").exists()
    last = command.stderr.strip().splitlines()[-1]
    assert last == "group_rollouts: stopped by SIGINT: nothing written"


@pytest.mark.timeout(600)
def test_a_cancelled_group_rollout_ends_its_rollouts(tmp_path: Path, user_tmp: Path) -> None:
    """``do_group_rollout`` cancelled while its rollouts run, the session still open: the
    builder's ``cleanup`` has ended every rollout (their slots released) before it returns."""
    script = ROOT / "tests/tinker_cookbook_cancel.py"
    command = group_rollouts(tmp_path, user_tmp, [], launcher=script)
    assert command.wait(timeout=500) == 0, command.output[-4000:]
    assert command.leftovers() == []
    result = json.loads(command.output.strip().splitlines()[0])
    assert result == {"started": 2, "running": [False, False]}
