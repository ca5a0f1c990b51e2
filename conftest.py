"""Repository-wide pytest configuration: hypothesis profiles and the test tiers.

A test is ``slow`` when it loads the real model, starts a server, a container or a Ray
cluster, uses the trainer's dependencies, or takes more than ``SLOW_S`` seconds; ``nox -s
unit`` runs the others (``-m "not slow"``, docs/testing.md). A test that uses one of
``SLOW_FIXTURES`` is marked ``slow`` here, so a new one cannot forget; ``xdist_group`` keeps
the tests of one shared server on one worker, so ``nox -s tests`` starts it once; tests marked
``heavy`` share one worker too, so two of them (7.6 GB for the JAX trainer's, 9.5 GB for
the Tinker engine's JIT compilation, a hundred docker or gVisor sandboxes) never run together
on a 2-core, 24 GB machine; a test of a live cluster (``CLUSTER_FIXTURES``, by argument or
by a ``live_cluster`` mark) is ``heavy`` and in no other group, so a parallel session starts
the cluster once, and the fixture fails if a second worker of the run starts one anyway; a
cluster's tests run one after the other (those marked ``breaks_cluster``, which kill a node,
last), and the cluster stops as soon as the last of them ends, not at the end of the session;
and workers get the slow tests first, so no long test starts last. Every run ends by naming
the unmarked tests that took longer than ``SLOW_S``.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ("pytester",)

# Ray (the ray sandbox backend's tests) turns a driver running under `uv run` (nox, CI) into
# `uv run` on every worker, with this repository uploaded as the job's working directory; the
# test cluster's workers already run this environment's Python. Read when ray is imported.
os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"

settings.register_profile(
    "ci",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
#: the inner loop (nox -s unit): tests asking for more examples ask for a multiple of this
settings.register_profile("dev", deadline=None, max_examples=10)
settings.register_profile("thorough", deadline=None, max_examples=5000)

#: a test that takes longer than this (its call, on an idle machine) belongs to the slow tier
SLOW_S = 3.0
#: session fixtures that start a real server: their tests are slow and share one worker each
SLOW_FIXTURES = frozenset({"llama_server", "exact_llama_server", "tools_llama_server"})
#: session fixtures that start a live cluster: their tests are slow and ``heavy``, and in the
#: ``heavy`` group only (never beside the memory-hungry tests, and the cluster starts once, on
#: the heavy tests' worker); a test reaching one through ``request.getfixturevalue`` says so
#: with ``@pytest.mark.live_cluster(name)``
CLUSTER_FIXTURES = frozenset({"ray_cluster"})
HEAVY_GROUP = "heavy"
T = TypeVar("T")


def _live_clusters(item: pytest.Item) -> set[str]:
    named = set(CLUSTER_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    return named | {str(mark.args[0]) for mark in item.iter_markers("live_cluster")}


def _cluster_order(item: pytest.Item) -> tuple[str, bool]:
    """Sort key keeping each cluster's tests together, after the tests of no cluster (a stable
    sort keeps the order within each), with the ones that break it last (a test that breaks a
    cluster names it: ``live_cluster`` or its fixture)."""
    clusters = ",".join(sorted(_live_clusters(item)))
    return clusters, item.get_closest_marker("breaks_cluster") is not None


def _groups(item: pytest.Item) -> set[str]:
    """The item's xdist groups (pytest-xdist runs an item of several in a group of its own)."""
    return {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }


@pytest.hookimpl(wrapper=True)  # marks before `-m` deselects, groups checked after pytest-xdist
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    for item in items:
        for name in SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(name))
        clusters = _live_clusters(item)
        if clusters:
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.heavy)
            other = _groups(item) - {HEAVY_GROUP}
            if other:
                raise pytest.UsageError(
                    f"{item.nodeid} uses the live cluster {', '.join(sorted(clusters))} and the "
                    f"xdist group {', '.join(sorted(other))}: a cluster's tests are in the "
                    f"{HEAVY_GROUP!r} group only (conftest.py), or a second worker starts one"
                )
        if item.get_closest_marker("heavy") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP))  # a shared server's group wins
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: hand out the long tests first,
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # short ones last
    items.sort(key=_cluster_order)
    yield
    if config.getoption("loadgroup", default=False):  # pytest-xdist workers of --dist loadgroup
        for item in items:
            _send_with_its_group(item)


def _send_with_its_group(item: pytest.Item) -> None:
    """Make sure the item's id carries its xdist groups, which is how ``--dist loadgroup`` sends
    a group to one worker. pytest-xdist 3.8 writes them into a field pytest 9.2 no longer reads
    (pytest-dev/pytest-xdist#1386): tests of one group ran on both workers, each starting its
    own Ray cluster. Written here into pytest 9.2's id instead; a failure names the cause."""
    groups = _groups(item)
    if not groups:
        return
    suffix = "@" + "_".join(sorted(groups))
    if not item.nodeid.endswith(suffix):
        from _pytest.nodeid import NodeId  # pytest 9.2's structured ids

        item._id = NodeId.parse(item.nodeid + suffix)
    if not item.nodeid.endswith(suffix):
        raise pytest.UsageError(
            f"--dist loadgroup cannot keep {item.nodeid} in its xdist group {suffix[1:]} with "
            "this pytest and pytest-xdist (pytest-dev/pytest-xdist#1386): run without -n"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reports = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if isinstance(report, pytest.TestReport)
    ]
    calls = [report for report in reports if report.when == "call"]
    unmarked = [r for r in calls if r.duration > SLOW_S and "slow" not in r.keywords]
    if unmarked:
        terminalreporter.section(f"unmarked tests slower than {SLOW_S:g} s: mark them slow")
        for report in sorted(unmarked, key=lambda r: -r.duration):
            terminalreporter.write_line(f"{report.duration:6.1f} s  {report.nodeid}")
    _time_by_worker(terminalreporter, reports)


def _time_by_worker(terminalreporter: pytest.TerminalReporter, reports: list[Any]) -> None:
    """Name the worker that set the run's wall time: when each pytest-xdist worker ran its last
    test, and how much of its time went to the ``heavy`` group (which runs one test at a time)."""
    by_worker: dict[str, list[Any]] = {}
    for report in reports:
        node = getattr(report, "node", None)  # set by pytest-xdist's controller
        if node is not None:
            by_worker.setdefault(str(node.gateway.id), []).append(report)
    if not by_worker:
        return
    began = min(report.start for report in reports)
    terminalreporter.section("time by xdist worker")
    for worker, own in sorted(by_worker.items()):
        tests = sum(report.duration for report in own)
        heavy = sum(report.duration for report in own if "heavy" in report.keywords)
        terminalreporter.write_line(
            f"{worker}: last test ended at {max(r.stop for r in own) - began:,.0f} s; "
            f"{len({r.nodeid for r in own})} tests took {tests:,.0f} s, "
            f"the heavy group {heavy:,.0f} s"
        )


@contextlib.contextmanager
def _only_one_per_run(config: pytest.Config, name: str) -> Iterator[None]:
    """Fail when another pytest-xdist worker of this run holds ``name`` (a session fixture that
    starts a cluster), instead of starting a second one: its tests escaped the one group."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:  # one process: a session fixture starts once
        yield
        return
    lock = Path(tempfile.gettempdir()) / f"hermes-{name}-{workerinput['testrunuid']}.lock"
    with lock.open("a+", encoding="utf-8") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.seek(0)
            raise RuntimeError(
                f"{name}: pytest-xdist worker {workerinput['workerid']} would start a second one "
                f"beside worker {held.read() or '?'}'s: its tests are not all in one xdist group "
                "(conftest.py, CLUSTER_FIXTURES)"
            ) from None
        held.seek(0)
        held.truncate()
        held.write(str(workerinput["workerid"]))
        held.flush()
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)


#: the live clusters this process started, by fixture name: the stack that stops each, or
#: ``None`` once stopped
_HELD = pytest.StashKey[dict[str, contextlib.ExitStack | None]]()


def _held(config: pytest.Config) -> dict[str, contextlib.ExitStack | None]:
    return config.stash.setdefault(_HELD, {})


@contextlib.contextmanager
def _hold_cluster(
    config: pytest.Config, name: str, cluster: contextlib.AbstractContextManager[T]
) -> Iterator[T]:
    """Start ``cluster`` (the session fixture ``name``'s), once per run, and let its last test
    stop it."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_only_one_per_run(config, name))
        value = stack.enter_context(cluster)
        _held(config)[name] = stack
        yield value


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Stop a live cluster once the last of its tests has run (they run one after the other,
    see ``_cluster_order``), rather than keep its daemons busy until the session ends."""
    result = yield
    following = _live_clusters(nextitem) if nextitem is not None else set()
    live = _held(item.config)
    for name in _live_clusters(item) - following:
        stack = live.get(name)
        if stack is not None:
            live[name] = None
            stack.close()
    return result


def pytest_runtest_setup(item: pytest.Item) -> None:
    live = _held(item.config)
    for name in _live_clusters(item):
        if name in live and live[name] is None:
            pytest.fail(f"{name} was stopped after its last test, yet {item.nodeid} needs it")


@pytest.fixture(scope="session", autouse=True)
def _jax_compile_cache() -> None:
    """Where the collected tests imported JAX (the learner's, in process), its programs come
    from the trainer's persistent compilation cache, as a trainer run's do (``--jax-cache``'s
    default). Four learner test modules took 67 s without it, 47 s with an empty cache (new
    learners of the same shapes hit it within the run) and 25 s with a warm one."""
    if "jax" in sys.modules:
        from hermes_trainer.compile_cache import default_compile_cache, use_compile_cache

        use_compile_cache(default_compile_cache())


@pytest.fixture(scope="session")
def ray_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A live two-node Ray cluster on this machine (tests/ray_cluster.py), stopped when its
    last test ends (or the session does), even when tests fail; skipped when Ray is not
    installed; an error on a second pytest-xdist worker of the run (one cluster per run)."""
    pytest.importorskip(
        "ray", reason="Ray is not installed: uv sync --inexact --package hermes-sandbox --extra ray"
    )
    path = Path(__file__).with_name("tests") / "ray_cluster.py"
    spec = importlib.util.spec_from_file_location("hermes_tests_ray_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with _hold_cluster(request.config, "ray_cluster", module.ray_cluster()) as cluster:
        yield cluster
