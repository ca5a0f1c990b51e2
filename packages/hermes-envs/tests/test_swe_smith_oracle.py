"""swe_smith_oracle on the offline fixture set: oracle patch 1.0, do-nothing 0.0."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hermes_envs import DatasetError, RolloutRunner
from hermes_envs.swe_smith import (
    FIXTURES,
    RepoCache,
    SweRow,
    SweSmithConfig,
    SweSmithOracleEnv,
    build_fixture_mirror,
    fixture_rows,
)
from hermes_envs.swe_smith.env import PTH_INSTALL
from hermes_envs.swe_smith.verify import PytestOutcome, chunks, score_tests

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("swe-cache"))


def _item(env: SweSmithOracleEnv, instance_id: str) -> Any:
    return next(i for i in env.items(seed=0) if i.id == instance_id)


@pytest.mark.parametrize("instance", FIXTURES, ids=lambda f: f.instance_id)
async def test_oracle_solves_and_idle_fails(
    instance: Any, cache_dir: str, pool: Any, toolsets: Any, oracle_agent: Any, idle_agent: Any
) -> None:
    env = SweSmithOracleEnv(SweSmithConfig(cache_dir=cache_dir))
    item = _item(env, instance.instance_id)
    solved = await RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets
    ).run_rollout(item, toolsets)
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0, solved.score.details
    assert solved.score.metrics["fail_to_pass"] == 1.0
    unsolved = await RolloutRunner(env, pool, idle_agent, toolsets).run_rollout(item, toolsets)
    assert unsolved.score is not None, unsolved.failure
    assert unsolved.score.reward == 0.0
    assert unsolved.score.metrics["fail_to_pass"] == 0.0
    assert unsolved.score.metrics["pass_to_pass"] == 1.0


async def test_jsonl_rows_with_file_url_mirror(
    tmp_path: Path, cache_dir: str, pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    url = await build_fixture_mirror(Path(cache_dir) / "mirror")
    assert url.startswith("file://")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in fixture_rows()) + "\n\n")
    env = SweSmithOracleEnv(
        SweSmithConfig(
            source="jsonl",
            jsonl_path=str(rows),
            repo_base_url=url,
            cache_dir=str(tmp_path / "cache"),
            install_command=PTH_INSTALL,
            prompt_mode="problem_statement+text",
            test_chunk_size=2,
        )
    )
    item = _item(env, FIXTURES[2].instance_id)
    assert "Relevant code" in str(env.prompt(item)[1].content)
    solved = await RolloutRunner(
        env, pool, oracle_agent(env.oracle_solution(item)), toolsets
    ).run_rollout(item, toolsets)
    assert solved.score is not None, solved.failure
    assert solved.score.reward == 1.0, solved.score.details
    assert solved.score.metrics["pass_to_pass"] == 1.0


async def test_hanging_tests_hit_the_test_timeout(
    cache_dir: str, pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = SweSmithOracleEnv(SweSmithConfig(cache_dir=cache_dir, test_timeout=2))
    item = _item(env, FIXTURES[2].instance_id)
    hang = "printf 'import time\\ntime.sleep(60)\\n' >> intervals/__init__.py"
    hung = await RolloutRunner(env, pool, oracle_agent(hang), toolsets).run_rollout(item, toolsets)
    assert hung.score is not None, hung.failure
    assert hung.score.reward == 0.0
    assert hung.score.metrics["tests_timed_out"] == 1.0
    assert hung.timings["verify_s"] < 30


async def test_edited_tests_are_restored_before_verification(
    cache_dir: str, pool: Any, toolsets: Any, oracle_agent: Any
) -> None:
    env = SweSmithOracleEnv(SweSmithConfig(cache_dir=cache_dir))
    item = _item(env, FIXTURES[0].instance_id)
    cheat = "printf 'def test_median_even():\\n    pass\\n' > tests/test_stats.py"
    cheated = await RolloutRunner(env, pool, oracle_agent(cheat), toolsets).run_rollout(
        item, toolsets
    )
    assert cheated.score is not None
    assert cheated.score.reward == 0.0


async def test_setup_metadata_is_json_only(cache_dir: str, pool: Any) -> None:
    """Setup metadata goes into every record: bytes there crashed the batch runner (issue 23)."""
    env = SweSmithOracleEnv(SweSmithConfig(cache_dir=cache_dir))
    item = _item(env, FIXTURES[0].instance_id)
    slot = await pool.acquire("metadata")
    try:
        metadata = await env.setup_workspace(item, slot)
    finally:
        await pool.release(slot)
    assert json.loads(json.dumps(metadata)) == {"repo": FIXTURES[0].repo, "ref": item.id}


async def test_test_files_are_read_from_the_bare_cache(tmp_path: Path, cache_dir: str) -> None:
    url = await build_fixture_mirror(Path(cache_dir) / "mirror")
    cache = RepoCache(tmp_path / "repos", url, git_timeout=60, lock_timeout=60)
    inst = FIXTURES[0]
    tar = await cache.checkout_tar(inst.repo, inst.instance_id)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        handle = archive.extractfile("./tests/test_stats.py")
        assert handle is not None
        expected = handle.read()
    files = await cache.read_files(
        inst.repo, inst.instance_id, ["tests/test_stats.py", "tests", "no/such.py"]
    )
    assert files == {"tests/test_stats.py": expected}
    assert await cache.read_files(inst.repo, inst.instance_id, []) == {}


async def test_concurrent_checkouts_share_one_bare_clone(tmp_path: Path, cache_dir: str) -> None:
    url = await build_fixture_mirror(Path(cache_dir) / "mirror")
    cache = RepoCache(tmp_path / "repos", url, git_timeout=60, lock_timeout=60)
    inst = FIXTURES[1]
    tars: list[bytes] = []

    async def one() -> None:
        tars.append(await cache.checkout_tar(inst.repo, inst.instance_id))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert len(tars) == 4
    for tar in tars:
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            names = {m.name.removeprefix("./") for m in archive.getmembers()}
            assert inst.buggy_path in names
            assert not any(n == ".git" or n.startswith(".git/") for n in names)
            handle = archive.extractfile(f"./{inst.buggy_path}")
            assert handle is not None
            assert inst.buggy in handle.read().decode()
    assert [p.name for p in (tmp_path / "repos").glob("*.git")] == [
        inst.repo.replace("/", "__") + ".git"
    ]
    assert not list((tmp_path / "repos" / "worktrees").iterdir())


def test_row_parsing_accepts_json_strings_and_rejects_bad_rows() -> None:
    row = SweRow.parse(
        {
            "repo": "o/r",
            "instance_id": "o__r.1",
            "problem_statement": "x",
            "FAIL_TO_PASS": '["t.py::a"]',
            "PASS_TO_PASS": "[]",
        }
    )
    assert row.ref == "o__r.1"
    assert row.fail_to_pass == ("t.py::a",)
    with pytest.raises(DatasetError, match="FAIL_TO_PASS"):
        SweRow.parse({"repo": "o/r", "instance_id": "i", "problem_statement": "x"})
    with pytest.raises(DatasetError, match="repo"):
        SweRow.parse({"instance_id": "i", "problem_statement": "x", "FAIL_TO_PASS": ["a"]})


def test_binary_and_shaped_rewards() -> None:
    outcome = PytestOutcome(frozenset({"f1", "p1", "p2"}), timed_out=False)
    binary = score_tests(outcome, ["f1", "f2"], ["p1", "p2"], shaped=False)
    shaped = score_tests(outcome, ["f1", "f2"], ["p1", "p2"], shaped=True)
    assert binary.reward == 0.0
    assert shaped.reward == 0.5
    assert score_tests(outcome, ["f1"], ["p1", "p2"], shaped=False).reward == 1.0
    assert [list(c) for c in chunks(["a", "b", "c"], 2)] == [["a", "b"], ["c"]]


def test_hf_source_loads_through_datasets(tmp_path: Path) -> None:
    """``source="hf"`` goes through ``datasets.load_dataset`` (here a local data directory,
    so no network), with list columns and JSON-string node ids both accepted."""
    folder = tmp_path / "swe-smith-local"
    folder.mkdir()
    rows = fixture_rows()
    rows[0] = {**rows[0], "FAIL_TO_PASS": json.dumps(rows[0]["FAIL_TO_PASS"])}
    (folder / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = SweSmithOracleEnv(
        SweSmithConfig(
            source="hf",
            hf_dataset=str(folder),
            hf_cache_dir=str(tmp_path / "hf"),
            cache_dir=str(tmp_path / "c"),
        )
    )
    loaded = env.load_rows()
    assert sorted(r.instance_id for r in loaded) == sorted(f.instance_id for f in FIXTURES)
    assert [i.id for i in env.items(seed=3)] == [i.id for i in env.items(seed=3)]
    missing = SweSmithOracleEnv(SweSmithConfig(source="hf", hf_dataset=str(tmp_path / "none")))
    with pytest.raises(DatasetError):
        missing.load_rows()


async def test_mirror_and_cache_are_safe_across_processes(tmp_path: Path) -> None:
    """Two processes building the same mirror and cache at once both succeed (file locks)."""
    import sys

    script = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from hermes_envs.swe_smith import FIXTURES, RepoCache, build_fixture_mirror\n"
        "async def main():\n"
        "    root = Path(sys.argv[1])\n"
        "    url = await build_fixture_mirror(root / 'mirror')\n"
        "    cache = RepoCache(root / 'repos', url, git_timeout=60, lock_timeout=60)\n"
        "    for f in FIXTURES:\n"
        "        assert len(await cache.checkout_tar(f.repo, f.instance_id)) > 0\n"
        "anyio.run(main)\n"
    )
    results: list[int] = []

    async def one() -> None:
        done = await anyio.run_process([sys.executable, "-c", script, str(tmp_path)], check=False)
        results.append(done.returncode)
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    assert results == [0, 0]
    bare = sorted(p.name for p in (tmp_path / "repos").glob("*.git"))
    assert bare == sorted({f.repo.replace("/", "__") + ".git" for f in FIXTURES})
