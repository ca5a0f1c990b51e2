"""The test tiers of the root conftest.py: a test using a real server's fixture is slow
whatever it says, ``-m "not slow"`` (``nox -s unit``) leaves it out, ``-m slow`` picks it, its
server's tests share one pytest-xdist worker (as do ``heavy`` tests and a live cluster's, whose
fixture refuses a second worker), and a run names unmarked tests that were slow."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

SUITE = """
import time

import pytest


@pytest.fixture(scope="session")
def llama_server():
    return "http://127.0.0.1:1"


def test_uses_the_server(llama_server):
    assert llama_server


def test_plain():
    pass


def test_lingers():
    time.sleep(0.3)


@pytest.mark.slow
def test_marked_and_lingers():
    time.sleep(0.3)


@pytest.mark.heavy
def test_is_heavy():
    pass


@pytest.mark.live_cluster("ray_cluster")
def test_reaches_the_cluster():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    # the real hooks, with the "slow" threshold brought down to what a unit test may wait
    conftest = ROOT_CONFTEST.read_text(encoding="utf-8")
    assert "\nSLOW_S = 3.0\n" in conftest
    pytester.makeconftest(conftest.replace("\nSLOW_S = 3.0\n", "\nSLOW_S = 0.2\n"))
    markers = "".join(
        f"\n    {name}: {name}"
        for name in ("slow", "e2e", "heavy", "live_cluster", "breaks_cluster")
    )
    pytester.makeini(f"[pytest]\nmarkers ={markers}\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_real_server_fixture_makes_a_test_slow(suite: pytest.Pytester) -> None:
    unit = suite.runpytest_inprocess("-m", "not slow", "--strict-markers")
    unit.assert_outcomes(passed=3, deselected=3)
    slow = suite.runpytest_inprocess("-m", "slow", "--strict-markers", "-v")
    slow.assert_outcomes(passed=3, deselected=3)
    slow.stdout.fnmatch_lines(["*test_uses_the_server PASSED*"])


def test_a_server_fixture_groups_its_tests_on_one_worker(suite: pytest.Pytester) -> None:
    items, _ = suite.inline_genitems()
    (used,) = [i for i in items if i.name == "test_uses_the_server"]
    assert [m.args for m in used.iter_markers("xdist_group")] == [("llama_server",)]


def test_heavy_tests_share_one_worker(suite: pytest.Pytester) -> None:
    items, _ = suite.inline_genitems()
    groups = {i.name: [m.args for m in i.iter_markers("xdist_group")] for i in items}
    assert groups["test_is_heavy"] == [("heavy",)]
    assert groups["test_reaches_the_cluster"] == [("heavy",)]
    assert groups["test_plain"] == []


def test_a_cluster_test_in_another_group_is_a_usage_error(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_two_groups="""
        import pytest

        @pytest.mark.xdist_group("llama_server")
        def test_both(ray_cluster):
            pass
        """
    )
    result = suite.runpytest_inprocess("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_both uses the live cluster ray_cluster and the xdist*"])


def test_a_test_that_breaks_the_cluster_runs_last(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_a_breaker="""
        import pytest

        @pytest.mark.breaks_cluster
        @pytest.mark.live_cluster("ray_cluster")
        def test_kills_a_node():
            pass
        """
    )
    result = suite.runpytest_inprocess("-v")  # test_a_breaker.py is collected first
    ran = [line.split("::")[1].split()[0] for line in result.outlines if " PASSED" in line]
    assert len(ran) == 7
    assert ran[-1] == "test_kills_a_node", ran


STOPPED_EARLY = """
import contextlib
from pathlib import Path


@contextlib.contextmanager
def _events():
    log = Path("events")
    log.write_text("started\\n")
    yield
    log.write_text(log.read_text() + "stopped\\n")


@pytest.fixture(scope="session")
def a_cluster(request):
    with _hold_cluster(request.config, "a_cluster", _events()):
        yield
"""

CLUSTER_TESTS = """
from pathlib import Path

import pytest


@pytest.mark.live_cluster("a_cluster")
def test_one(a_cluster):
    pass


@pytest.mark.live_cluster("a_cluster")
def test_two(a_cluster):
    pass


@pytest.mark.live_cluster("z_cluster")
def test_after():
    assert Path("events").read_text() == "started\\nstopped\\n"
"""

#: a plugin that moves the last test of a_cluster after the tests of another cluster
INTERLEAVE = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    two = next(item for item in items if item.name == "test_two")
    items.remove(two)
    items.append(two)
"""


def test_a_cluster_stops_when_its_last_test_ends(suite: pytest.Pytester) -> None:
    conftest = suite.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + STOPPED_EARLY, encoding="utf-8")
    suite.makepyfile(test_clusters=CLUSTER_TESTS)
    result = suite.runpytest_inprocess("-v", "test_clusters.py")
    result.assert_outcomes(passed=3)
    ran = [line.split("::")[1].split()[0] for line in result.outlines if " PASSED" in line]
    assert ran == ["test_one", "test_two", "test_after"]


def test_a_test_of_a_stopped_cluster_fails_and_says_so(suite: pytest.Pytester) -> None:
    conftest = suite.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + STOPPED_EARLY, encoding="utf-8")
    suite.makepyfile(test_clusters=CLUSTER_TESTS, interleave=INTERLEAVE)
    suite.syspathinsert()
    result = suite.runpytest_inprocess("-p", "interleave", "test_clusters.py")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*a_cluster was stopped after its last test, yet *test_two*"])


CLUSTER = """
import time


@pytest.fixture(scope="session")
def fake_cluster(request):
    with _only_one_per_run(request.config, "fake_cluster"):
        time.sleep(3)  # both workers ask for it at once
        yield
"""

ONE_GROUP = """
import pytest

@pytest.mark.xdist_group("one")
def test_first(fake_cluster):
    pass

@pytest.mark.xdist_group("one")
def test_second(fake_cluster):
    pass
"""


def _add_the_fake_cluster(suite: pytest.Pytester) -> None:
    conftest = suite.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + CLUSTER, encoding="utf-8")


@pytest.mark.slow  # two pytest-xdist workers
def test_one_group_runs_on_one_worker_under_loadgroup(suite: pytest.Pytester) -> None:
    _add_the_fake_cluster(suite)
    suite.makepyfile(test_suite=ONE_GROUP)
    result = suite.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=2)
    workers = {line.split()[0] for line in result.outlines if "PASSED test_suite.py::test_" in line}
    assert len(workers) == 1, result.outlines
    assert not list(suite.path.glob("**/hermes-fake_cluster-*.lock"))
    # the run's summary names that worker with both tests and the fixture's 3 s
    worker = workers.pop().strip("[]")
    result.stdout.fnmatch_lines(
        ["*time by xdist worker*", f"{worker}: last test ended at * s; 2 tests took [3-9] s, *"]
    )


@pytest.mark.slow  # two pytest-xdist workers
def test_a_second_worker_may_not_start_the_cluster(suite: pytest.Pytester) -> None:
    _add_the_fake_cluster(suite)
    suite.makepyfile(
        test_suite=ONE_GROUP.replace('"one")\ndef test_second', '"two")\ndef test_second')
    )
    result = suite.runpytest_subprocess("-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*fake_cluster: pytest-xdist worker gw* would start a second one*"]
    )


def test_the_run_names_unmarked_tests_slower_than_the_threshold(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["*unmarked tests slower than 0.2 s: mark them slow*", "*s  test_suite.py::test_lingers"]
    )
    assert "test_marked_and_lingers" not in result.stdout.str()
