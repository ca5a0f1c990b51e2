"""The test tiers of the root conftest.py: a test using a real server's fixture is slow
whatever it says, ``-m "not slow"`` (``nox -s unit``) leaves it out, ``-m slow`` picks it, its
server's tests share one pytest-xdist worker (as do ``heavy`` tests), and a run names
unmarked tests that were slow."""

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
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    # the real hooks, with the "slow" threshold brought down to what a unit test may wait
    conftest = ROOT_CONFTEST.read_text(encoding="utf-8")
    assert "\nSLOW_S = 3.0\n" in conftest
    pytester.makeconftest(conftest.replace("\nSLOW_S = 3.0\n", "\nSLOW_S = 0.2\n"))
    markers = "".join(f"\n    {name}: {name}" for name in ("slow", "e2e", "heavy"))
    pytester.makeini(f"[pytest]\nmarkers ={markers}\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_real_server_fixture_makes_a_test_slow(suite: pytest.Pytester) -> None:
    unit = suite.runpytest_inprocess("-m", "not slow", "--strict-markers")
    unit.assert_outcomes(passed=3, deselected=2)
    slow = suite.runpytest_inprocess("-m", "slow", "--strict-markers", "-v")
    slow.assert_outcomes(passed=2, deselected=3)
    slow.stdout.fnmatch_lines(["*test_uses_the_server PASSED*"])


def test_a_server_fixture_groups_its_tests_on_one_worker(suite: pytest.Pytester) -> None:
    items, _ = suite.inline_genitems()
    (used,) = [i for i in items if i.name == "test_uses_the_server"]
    assert [m.args for m in used.iter_markers("xdist_group")] == [("llama_server",)]


def test_heavy_tests_share_one_worker(suite: pytest.Pytester) -> None:
    items, _ = suite.inline_genitems()
    groups = {i.name: [m.args for m in i.iter_markers("xdist_group")] for i in items}
    assert groups["test_is_heavy"] == [("heavy",)]
    assert groups["test_plain"] == []


def test_the_run_names_unmarked_tests_slower_than_the_threshold(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess()
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        ["*unmarked tests slower than 0.2 s: mark them slow*", "*s  test_suite.py::test_lingers"]
    )
    assert "test_marked_and_lingers" not in result.stdout.str()
