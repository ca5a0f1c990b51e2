"""SWE-smith verification inside the slot: venv, pytest, install the repo, run node ids."""

from __future__ import annotations

import importlib.metadata as metadata
import io
import re
import shlex
import tarfile
from collections.abc import Iterable, Sequence

import attrs
from hermes_protocols import ConfigError, FailureKind, Score, Slot
from packaging.requirements import Requirement

VENV = ".hermes_venv"
_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL|SKIPPED) (\S+)", re.MULTILINE)


def _closure(root: str) -> list[metadata.Distribution]:
    seen: dict[str, metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name == root:
                raise ConfigError(f"{root} is not installed on this host") from None
            continue
        seen[name] = dist
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)  # not pytest's colorama off Windows: another
                # package's copy on sys.path (Ray's, with files missing) would be packed
    return list(seen.values())


def host_package_tar(root: str = "pytest") -> bytes:
    """A tar of ``root`` and its installed dependencies, to unpack into a venv's site-packages.

    Pure-Python only; used to give a slot pytest with no network (blocking: run in a thread).
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for dist in _closure(root):
            for file in dist.files or ():
                rel = str(file)
                if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
                    continue
                tar.add(str(dist.locate_file(file)), arcname=rel, recursive=False)
    return buffer.getvalue()


@attrs.frozen(slots=True)
class PytestOutcome:
    passed: frozenset[str]
    timed_out: bool


def chunks(values: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


async def run_pytest(
    slot: Slot, node_ids: Sequence[str], *, chunk_size: int, timeout: float
) -> PytestOutcome:
    """Run ``node_ids`` in chunks with the venv's pytest; collect the ids that passed."""
    passed: set[str] = set()
    timed_out = False
    for chunk in chunks(list(dict.fromkeys(node_ids)), chunk_size):
        command = f"{VENV}/bin/python -m pytest -p no:cacheprovider -rA --tb=no -q " + " ".join(
            shlex.quote(n) for n in chunk
        )
        result = await slot.exec(command, timeout=timeout)
        timed_out = timed_out or result.timed_out
        passed.update(
            n for status, n in _RESULT.findall(result.stdout) if status in ("PASSED", "XPASS")
        )
    return PytestOutcome(frozenset(passed), timed_out)


def score_tests(
    outcome: PytestOutcome, f2p: Sequence[str], p2p: Sequence[str], *, shaped: bool
) -> Score:
    """Binary: 1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passes. Shaped: the product
    of the two pass fractions (still 0.0 while no FAIL_TO_PASS test passes)."""
    f2p_ok = sum(n in outcome.passed for n in f2p)
    p2p_ok = sum(n in outcome.passed for n in p2p)
    f2p_frac = f2p_ok / len(f2p) if f2p else 1.0
    p2p_frac = p2p_ok / len(p2p) if p2p else 1.0
    solved = f2p_ok == len(f2p) and p2p_ok == len(p2p)
    reward = f2p_frac * p2p_frac if shaped else float(solved)
    return Score(
        reward=reward,
        metrics={
            "fail_to_pass": f2p_frac,
            "pass_to_pass": p2p_frac,
            "solved": float(solved),
            "tests_timed_out": float(outcome.timed_out),
        },
        failure=None if solved else FailureKind.MODEL,
        details=""
        if solved
        else (f"FAIL_TO_PASS {f2p_ok}/{len(f2p)}, PASS_TO_PASS {p2p_ok}/{len(p2p)}"),
    )
