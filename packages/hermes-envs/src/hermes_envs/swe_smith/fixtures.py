"""The offline SWE-smith fixture set: small Python repositories with one injected bug each.

Sources live here as text; :func:`build_fixture_mirror` turns them into git repositories (one
branch per instance, named by ``instance_id`` like SWE-smith's mirrors) under a directory that
``repo_base_url="file://..."`` can point at. Oracle patches are computed from the sources.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping

import attrs

_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["{name}"]
"""


@attrs.frozen(slots=True)
class FixtureInstance:
    """One repository, the bug injected into it, and the tests that tell them apart."""

    repo: str
    instance_id: str
    files: Mapping[str, str]
    buggy_path: str
    fixed: str
    buggy: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]

    def buggy_files(self) -> dict[str, str]:
        files = dict(self.files)
        source = files[self.buggy_path]
        if self.fixed not in source:
            raise AssertionError(f"{self.instance_id}: fixed snippet not in {self.buggy_path}")
        files[self.buggy_path] = source.replace(self.fixed, self.buggy, 1)
        return files

    def patch(self) -> str:
        """The oracle patch (``git apply`` format) turning the buggy repo into the fixed one."""
        before = self.buggy_files()[self.buggy_path].splitlines(keepends=True)
        after = self.files[self.buggy_path].splitlines(keepends=True)
        diff = difflib.unified_diff(
            before, after, f"a/{self.buggy_path}", f"b/{self.buggy_path}", n=3
        )
        return f"diff --git a/{self.buggy_path} b/{self.buggy_path}\n" + "".join(diff)

    def row(self) -> dict[str, object]:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "problem_statement": self.problem_statement,
            "FAIL_TO_PASS": list(self.fail_to_pass),
            "PASS_TO_PASS": list(self.pass_to_pass),
            "patch": self.patch(),
            "text": "\n".join(
                f"--- {p}\n{c}"
                for p, c in sorted(self.buggy_files().items())
                if p.endswith(".py") and not p.startswith("tests/")
            ),
        }


_STATS = '''"""Small statistics helpers."""


def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def spread(values):
    return max(values) - min(values)
'''

_STATS_TESTS = """from mathkit.stats import mean, median, spread


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_odd():
    assert median([5, 1, 3]) == 3


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5


def test_spread():
    assert spread([3, 9, 4]) == 6
"""

_SLUG = '''"""Text helpers."""

import re


def slugify(text):
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)


def title_case(text):
    return " ".join(w[:1].upper() + w[1:] for w in text.split())
'''

_SLUG_TESTS = """from textkit.slug import slugify, title_case


def test_slugify_simple():
    assert slugify("hello world") == "hello-world"


def test_slugify_mixed_case():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_digits():
    assert slugify("Top 10 Tips") == "top-10-tips"


def test_title_case():
    assert title_case("a tale of two") == "A Tale Of Two"
"""

_INTERVALS = '''"""Interval arithmetic."""


def merge(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    return sum(end - start for start, end in merge(intervals))
'''

_INTERVALS_TESTS = """from intervals.core import merge, total_length


def test_merge_disjoint():
    assert merge([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_merge_overlapping():
    assert merge([(1, 4), (2, 6)]) == [(1, 6)]


def test_merge_touching():
    assert merge([(1, 3), (3, 5)]) == [(1, 5)]


def test_total_length_touching():
    assert total_length([(0, 2), (2, 4), (10, 11)]) == 5
"""


def _repo(name: str, module: str, source: str, tests: str) -> dict[str, str]:
    return {
        "pyproject.toml": _PYPROJECT.format(name=name),
        f"{name}/__init__.py": "",
        f"{name}/{module}.py": source,
        f"tests/test_{module}.py": tests,
        "README.md": f"# {name}\n",
    }


FIXTURES: tuple[FixtureInstance, ...] = (
    FixtureInstance(
        repo="hermes-fixtures/mathkit",
        instance_id="hermes-fixtures__mathkit.median_even",
        files=_repo("mathkit", "stats", _STATS, _STATS_TESTS),
        buggy_path="mathkit/stats.py",
        fixed="return (ordered[mid - 1] + ordered[mid]) / 2",
        buggy="return ordered[mid]",
        problem_statement="`mathkit.stats.median` returns the wrong value for lists with an even "
        "number of elements: `median([4, 1, 3, 2])` gives 3 instead of 2.5.",
        fail_to_pass=("tests/test_stats.py::test_median_even",),
        pass_to_pass=(
            "tests/test_stats.py::test_mean",
            "tests/test_stats.py::test_median_odd",
            "tests/test_stats.py::test_spread",
        ),
    ),
    FixtureInstance(
        repo="hermes-fixtures/textkit",
        instance_id="hermes-fixtures__textkit.slug_case",
        files=_repo("textkit", "slug", _SLUG, _SLUG_TESTS),
        buggy_path="textkit/slug.py",
        fixed='words = re.findall(r"[a-z0-9]+", text.lower())',
        buggy='words = re.findall(r"[a-z0-9]+", text)',
        problem_statement="`textkit.slug.slugify` drops capitalised words: "
        '`slugify("Hello, World!")` returns "ello-orld" instead of "hello-world".',
        fail_to_pass=(
            "tests/test_slug.py::test_slugify_mixed_case",
            "tests/test_slug.py::test_slugify_digits",
        ),
        pass_to_pass=(
            "tests/test_slug.py::test_slugify_simple",
            "tests/test_slug.py::test_title_case",
        ),
    ),
    FixtureInstance(
        repo="hermes-fixtures/intervals",
        instance_id="hermes-fixtures__intervals.touching",
        files=_repo("intervals", "core", _INTERVALS, _INTERVALS_TESTS),
        buggy_path="intervals/core.py",
        fixed="if merged and start <= merged[-1][1]:",
        buggy="if merged and start < merged[-1][1]:",
        problem_statement="`intervals.core.merge` does not merge intervals that touch: "
        "`merge([(1, 3), (3, 5)])` should be `[(1, 5)]`, and `total_length` is affected too.",
        fail_to_pass=("tests/test_core.py::test_merge_touching",),
        pass_to_pass=(
            "tests/test_core.py::test_merge_disjoint",
            "tests/test_core.py::test_merge_overlapping",
            "tests/test_core.py::test_total_length_touching",
        ),
    ),
)


def fixture_digest() -> str:
    """A short hash of the fixture sources: mirrors built from other sources never mix."""
    blob = json.dumps([f.row() for f in FIXTURES], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def fixture_rows() -> list[dict[str, object]]:
    """The fixture instances as SWE-smith rows."""
    return [f.row() for f in FIXTURES]
