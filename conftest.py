"""Repository-wide pytest configuration: hypothesis profiles and the test tiers.

A test is ``slow`` when it loads the real model, starts a server, a container or a Ray
cluster, uses the trainer's dependencies, or takes more than ``SLOW_S`` seconds; ``nox -s
unit`` runs the others (``-m "not slow"``, docs/testing.md). A test that uses one of
``SLOW_FIXTURES`` is marked ``slow`` here, so a new one cannot forget; ``xdist_group`` keeps
the tests of one shared server on one worker, so ``nox -s tests`` starts it once; tests marked
``heavy`` share one worker too, so two of them (7.6 GB for the JAX trainer's, 9.5 GB for
the Tinker engine's JIT compilation, a hundred docker or gVisor sandboxes) never run together
on a 2-core, 24 GB machine; and workers get the
slow tests first, so no long test starts last. Every run ends by naming the unmarked
tests that took longer than ``SLOW_S``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
SLOW_FIXTURES = frozenset({"llama_server", "exact_llama_server"})
#: session fixtures that start a live cluster: their tests are slow and ``heavy`` (never beside
#: the memory-hungry tests, and the cluster starts once, on the heavy tests' worker)
HEAVY_FIXTURES = frozenset({"ray_cluster"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(name))
        if HEAVY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.heavy)
        if item.get_closest_marker("heavy") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group("heavy"))  # a shared server's group wins
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: hand out the long tests first,
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # short ones last


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    calls = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if isinstance(report, pytest.TestReport) and report.when == "call"
    ]
    unmarked = [r for r in calls if r.duration > SLOW_S and "slow" not in r.keywords]
    if unmarked:
        terminalreporter.section(f"unmarked tests slower than {SLOW_S:g} s: mark them slow")
        for report in sorted(unmarked, key=lambda r: -r.duration):
            terminalreporter.write_line(f"{report.duration:6.1f} s  {report.nodeid}")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A live two-node Ray cluster on this machine (tests/ray_cluster.py), stopped at the end
    of the session, even when tests fail; skipped when Ray is not installed."""
    pytest.importorskip(
        "ray", reason="Ray is not installed: uv sync --inexact --package hermes-sandbox --extra ray"
    )
    path = Path(__file__).with_name("tests") / "ray_cluster.py"
    spec = importlib.util.spec_from_file_location("hermes_tests_ray_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with module.ray_cluster() as cluster:
        yield cluster
