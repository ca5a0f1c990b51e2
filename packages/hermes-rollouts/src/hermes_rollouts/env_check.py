"""The environment check: run an environment through the real rollout runner on a real
sandbox, before any training, and report every check as a row (``hermes-envs check ENV``).

Without a sandbox: items are deterministic with unique ids, train and test are disjoint, item
data is plain JSON, prompts are non-empty (:mod:`hermes_rollouts.check_items`). On the
sandbox: a host starts; ``setup_workspace`` finishes in time and gives the same metadata and
files on two fresh slots; the oracle (:class:`hermes_envs.ScriptAgent` running
``oracle_solution``, when the environment has one) scores 1.0 and a do-nothing agent 0.0 on
each item; rewards are in [0, 1]; every rollout's record goes through the batch runner's
record path (:func:`rollout_record`, :func:`encode_record`); a verifier meeting a dead sandbox
is an infrastructure failure, never a reward (:mod:`hermes_rollouts.check_faults`); after the
pool closes no slot is in use and nothing is left (:mod:`hermes_rollouts.leaks`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import attrs
from hermes_envs import (
    HasOracle,
    IdleAgent,
    RolloutRunner,
    RunnerConfig,
    ScriptAgent,
    ToolsetSelection,
)
from hermes_protocols import (
    ConfigError,
    Environment,
    FailureKind,
    HermesError,
    Item,
    JSONObject,
    ScoredRollout,
    SlotPool,
    Toolset,
)
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.factory import SandboxSpec, build_backend, build_toolsets

from hermes_rollouts.check_faults import DeadSandboxVerify
from hermes_rollouts.check_items import check_items, one_line
from hermes_rollouts.check_report import CheckResult, EnvironmentCheckReport, Status
from hermes_rollouts.check_setup import check_setup
from hermes_rollouts.leaks import Snapshot, leftovers
from hermes_rollouts.option_names import OptionNames
from hermes_rollouts.plugins import reference_slug, resolve_environment
from hermes_rollouts.trajectory_record import RecordError, encode_record, rollout_record

RESOLVES = "resolves to an environment"
SANDBOX = "sandbox runs a command"
ORACLE = "oracle scores 1.0"
IDLE = "do-nothing agent scores 0.0"
REWARDS = "rewards in [0, 1]"
RECORDS = "records are plain JSON"
INFRA = "dead sandbox in verify: infrastructure failure"
SLOTS = "no slot left in use"
LEAKS = "nothing left behind"
T = TypeVar("T")
#: seconds a slot acquire and the sandbox's first command may take
ACQUIRE_TIMEOUT_S = 300.0


async def check_environment(
    environment: str | Environment,
    *,
    options: Mapping[str, Any] | None = None,
    sandbox: SandboxSpec | None = None,
    items: int = 2,
    seed: int = 0,
    setup_timeout_s: float = 600.0,
    verify_timeout_s: float = 900.0,
    oracle_timeout_s: float = 600.0,
    option_names: Mapping[str, str] | None = None,
) -> EnvironmentCheckReport:
    """Check ``environment`` (a reference ``--env`` accepts, with ``options``, or an
    environment object) on ``sandbox`` (default: bwrap) with ``items`` items of ``seed``.

    A reference that cannot be resolved raises :class:`~hermes_protocols.ConfigError` (one
    line, in ``option_names``); everything the environment does wrong is a failed row."""
    started = anyio.current_time()
    names = OptionNames(option_names)
    spec = sandbox or SandboxSpec()
    if isinstance(environment, str):
        plugin = resolve_environment(environment, option=names("environment.name"))
        env = plugin.create(options, option=names("environment.options"))
        label, origin = environment, plugin.origin
    else:
        env, label, origin = environment, environment.name, "given object"
    backend = build_backend(spec, option_names=names.section("sandbox"))
    resolved = CheckResult(RESOLVES, Status.PASS, f"{origin}: {type(env).__name__} {env.name!r}")
    results, chosen = check_items(env, seed=seed, count=items)
    records: list[JSONObject] = []
    timeouts = _Timeouts(setup_timeout_s, verify_timeout_s, oracle_timeout_s)
    if chosen:
        pool_name = f"check-{reference_slug(label)[:24]}-{uuid.uuid4().hex[:6]}".lower()
        before = Snapshot.take()
        pool = SandboxPool(backend, _pool(pool_name))
        results += await _on_sandbox(env, chosen, pool, timeouts, records)
        found, seconds = await _timed(leftovers(backend, pool_name, before))
        results.append(_leaks(found, seconds))
    else:
        results.append(CheckResult(SANDBOX, Status.SKIP, "no item to run"))
    return EnvironmentCheckReport(
        environment=label,
        sandbox=spec.kind,
        items=len(chosen),
        results=(resolved, *results),
        seconds=anyio.current_time() - started,
        records=tuple(records),
    )


@attrs.frozen(slots=True)
class _Timeouts:
    setup_s: float
    verify_s: float
    oracle_s: float

    def runner(self) -> RunnerConfig:
        return RunnerConfig(
            max_attempts=1,
            retry_delay_s=0.0,
            acquire_timeout=ACQUIRE_TIMEOUT_S,
            setup_timeout=self.setup_s,
            agent_timeout=self.oracle_s + 60.0,
            verify_timeout=self.verify_s,
        )


def _pool(name: str) -> PoolConfig:
    return PoolConfig(name=name, slots_per_host=2, max_hosts=1, acquire_timeout=ACQUIRE_TIMEOUT_S)


async def _timed(work: Awaitable[T]) -> tuple[T, float]:
    started = anyio.current_time()
    value = await work
    return value, anyio.current_time() - started


async def _on_sandbox(
    env: Environment,
    items: Sequence[Item],
    pool: SandboxPool,
    timeouts: _Timeouts,
    records: list[JSONObject],
) -> list[CheckResult]:
    toolsets = build_toolsets(30.0, timeouts.oracle_s)
    terminal = [t for t in toolsets if t.name == "terminal"]
    try:
        async with pool:
            ran = await _sandbox_runs(pool)
            if ran.failed:
                return [ran]
            setup = await check_setup(env, pool, items[0], terminal, timeouts.runner())
            results = [ran, setup]
            rows, rollouts = await _rollouts(env, pool, items, toolsets, terminal, timeouts)
            results += rows
            results.append(_records(rollouts, records))
            results.append(await _dead_sandbox(env, pool, items[0], terminal, timeouts))
            busy = pool.stats().slots_busy
            results.append(
                CheckResult(SLOTS, Status.PASS, "every acquired slot was released")
                if busy == 0
                else CheckResult(SLOTS, Status.FAIL, f"{busy} slot(s) still in use")
            )
    except HermesError as exc:  # the pool could not start or stop its host
        return [CheckResult(SANDBOX, Status.FAIL, one_line(exc))]
    return results


async def _sandbox_runs(pool: SlotPool) -> CheckResult:
    started = anyio.current_time()
    try:
        slot = await pool.acquire("check-sandbox", timeout=ACQUIRE_TIMEOUT_S)
    except HermesError as exc:
        return CheckResult(SANDBOX, Status.FAIL, f"no host started: {one_line(exc)}")
    try:
        result = await slot.exec("echo hermes-check-ok", timeout=ACQUIRE_TIMEOUT_S)
    except HermesError as exc:
        result = None
        detail = one_line(exc)
    finally:
        with anyio.CancelScope(shield=True):
            await pool.release(slot)
    seconds = anyio.current_time() - started
    if result is None or "hermes-check-ok" not in result.stdout:
        detail = detail if result is None else f"echo exited {result.exit_code}"
        return CheckResult(SANDBOX, Status.FAIL, f"a host started but {detail}", seconds)
    return CheckResult(SANDBOX, Status.PASS, "a host started and ran echo", seconds)


async def _rollouts(
    env: Environment,
    pool: SlotPool,
    items: Sequence[Item],
    toolsets: Sequence[Toolset],
    terminal: Sequence[Toolset],
    timeouts: _Timeouts,
) -> tuple[list[CheckResult], list[ScoredRollout]]:
    """The oracle and the do-nothing agent on every item (the two at once per item)."""
    config = timeouts.runner()
    oracle: list[ScoredRollout] = []
    idle: list[ScoredRollout] = []
    outputs: dict[str, str] = {}
    idle_runner = RolloutRunner(env, pool, IdleAgent(), toolsets, config=config)
    # the oracle of the environment as set up for this pool (e.g. a task in its own image)
    solver = idle_runner.env if isinstance(idle_runner.env, HasOracle) else None
    try:
        allowed = idle_runner.resolve_toolsets(ToolsetSelection(), seed=0)
    except ConfigError as exc:
        return [CheckResult(IDLE, Status.FAIL, f"the environment's toolsets: {exc}")], []
    started = anyio.current_time()
    for item in items:
        try:
            script = None if solver is None else solver.oracle_solution(item)
        except Exception as exc:
            detail = f"oracle_solution({item.id!r}) raised {one_line(exc)}"
            return [CheckResult(ORACLE, Status.FAIL, detail)], [*oracle, *idle]
        async with anyio.create_task_group() as tg:
            if script is not None:
                agent = ScriptAgent(script, timeout_s=timeouts.oracle_s)

                async def solve(item: Item = item, agent: ScriptAgent = agent) -> None:
                    runner = RolloutRunner(env, pool, agent, toolsets, config=config)
                    oracle.append(await runner.run_rollout(item, terminal))
                    outputs[item.id] = agent.output

                tg.start_soon(solve)

            async def nothing(item: Item = item) -> None:
                idle.append(await idle_runner.run_rollout(item, allowed))

            tg.start_soon(nothing)
    seconds = anyio.current_time() - started
    rows = [
        _expect(ORACLE, oracle, 1.0, outputs, seconds)
        if solver is not None
        else CheckResult(ORACLE, Status.SKIP, "no oracle_solution(item): add one to check this"),
        _expect(IDLE, idle, 0.0, {}, seconds),
        _rewards([*oracle, *idle]),
    ]
    return rows, [*oracle, *idle]


def _expect(
    name: str,
    rollouts: Sequence[ScoredRollout],
    reward: float,
    outputs: Mapping[str, str],
    seconds: float,
) -> CheckResult:
    for rollout in rollouts:
        if rollout.failure is not None:
            failure = rollout.failure
            detail = f"item {rollout.item.id!r}: {failure.kind} failure in {failure.phase}: "
            return CheckResult(name, Status.FAIL, detail + failure.message[:300], seconds)
        assert rollout.score is not None
        if rollout.score.reward != reward:
            tail = " ".join(outputs.get(rollout.item.id, "").split())[-200:]
            said = f" (details: {rollout.score.details[:200]})" if rollout.score.details else ""
            output = f"; the script printed: {tail}" if tail else ""
            return CheckResult(
                name,
                Status.FAIL,
                f"item {rollout.item.id!r} scored {rollout.score.reward}{said}{output}",
                seconds,
            )
    return CheckResult(name, Status.PASS, f"{len(rollouts)}/{len(rollouts)} items", seconds)


def _rewards(rollouts: Sequence[ScoredRollout]) -> CheckResult:
    rewards = [r.score.reward for r in rollouts if r.score is not None]
    if not rewards:
        return CheckResult(REWARDS, Status.SKIP, "no rollout was scored")
    bad = [x for x in rewards if not (math.isfinite(x) and 0.0 <= x <= 1.0)]
    if bad:
        return CheckResult(REWARDS, Status.FAIL, f"reward {bad[0]} is outside [0, 1]")
    return CheckResult(REWARDS, Status.PASS, f"{len(rewards)} rewards")


def _records(rollouts: Sequence[ScoredRollout], written: list[JSONObject]) -> CheckResult:
    """Encode every rollout's record as the batch runner writes it; ``written`` gets them."""
    size = 0
    for rollout in rollouts:
        record = rollout_record(rollout, record_id=rollout.id, model="hermes-envs-check")
        try:
            size += len(encode_record(record))
        except RecordError as exc:
            return CheckResult(RECORDS, Status.FAIL, str(exc))
        written.append(record)
    detail = f"{len(written)} records ({size} bytes) through rollout_record, encode_record"
    return CheckResult(RECORDS, Status.PASS, detail)


async def _dead_sandbox(
    env: Environment,
    pool: SlotPool,
    item: Item,
    toolsets: Sequence[Toolset],
    timeouts: _Timeouts,
) -> CheckResult:
    faulty = DeadSandboxVerify(env)
    runner = RolloutRunner(faulty, pool, IdleAgent(), toolsets, config=timeouts.runner())
    rollout, seconds = await _timed(runner.run_rollout(item, toolsets))
    failure = rollout.failure
    if failure is not None and failure.kind is FailureKind.INFRASTRUCTURE:
        if failure.phase == "verify":
            detail = f"item {item.id!r}: {failure.message[:160]}"
            return CheckResult(INFRA, Status.PASS, detail, seconds)
        detail = f"item {item.id!r} failed in {failure.phase}, not in verify: {failure.message}"
        return CheckResult(INFRA, Status.FAIL, detail[:400], seconds)
    assert rollout.score is not None
    if faulty.hits.count == 0:
        return CheckResult(INFRA, Status.SKIP, "verify does not use the sandbox", seconds)
    return CheckResult(
        INFRA,
        Status.FAIL,
        f"verify returned reward {rollout.score.reward} when the sandbox could not run: let "
        "the SandboxError propagate (or return Score(failure=FailureKind.INFRASTRUCTURE))",
        seconds,
    )


def _leaks(found: Sequence[str], seconds: float) -> CheckResult:
    if found:
        shown = "; ".join(found[:5]) + (f" (and {len(found) - 5} more)" if len(found) > 5 else "")
        return CheckResult(LEAKS, Status.FAIL, shown, seconds)
    return CheckResult(
        LEAKS, Status.PASS, "no host directory, mount, container or process", seconds
    )
