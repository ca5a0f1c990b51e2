"""Build the fixture repositories as bare git repos: ``<root>/<owner>/<name>.git``."""

from __future__ import annotations

from pathlib import Path

import anyio

from hermes_envs.swe_smith.fixtures import FIXTURES, FixtureInstance
from hermes_envs.swe_smith.gitops import FIXED_IDENTITY, file_lock, git

_DONE = "hermes-fixture-complete"


async def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = anyio.Path(root / rel)
        await path.parent.mkdir(parents=True, exist_ok=True)
        await path.write_text(text)


async def _build_repo(root: Path, repo: str, instances: list[FixtureInstance]) -> None:
    bare = root / f"{repo}.git"
    if await anyio.Path(bare / _DONE).exists():
        return
    async with anyio.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        await anyio.Path(work).mkdir()
        await git(["init", "-q", "-b", "main"], cwd=work)
        await _write(work, dict(instances[0].files))
        await git(["add", "-A"], cwd=work)
        await git(["commit", "-qm", "initial"], cwd=work, env=FIXED_IDENTITY)
        for inst in instances:
            await git(["checkout", "-q", "-b", inst.instance_id, "main"], cwd=work)
            await _write(work, inst.buggy_files())
            await git(
                ["commit", "-qam", f"inject bug {inst.instance_id}"], cwd=work, env=FIXED_IDENTITY
            )
        await git(["checkout", "-q", "main"], cwd=work)
        staging = Path(f"{bare}.partial")
        await anyio.run_process(["rm", "-rf", str(staging)])
        await git(["clone", "-q", "--bare", str(work), str(staging)])
        await anyio.run_process(["rm", "-rf", str(bare)])
        await anyio.Path(staging).rename(bare)
        await anyio.Path(bare / _DONE).touch()


async def build_fixture_mirror(root: Path, *, lock_timeout: float = 300.0) -> str:
    """Create (once, under a file lock) the fixture repos under ``root``; return its URL."""
    await anyio.Path(root).mkdir(parents=True, exist_ok=True)
    by_repo: dict[str, list[FixtureInstance]] = {}
    for inst in FIXTURES:
        by_repo.setdefault(inst.repo, []).append(inst)
    async with file_lock(root / ".mirror.lock", timeout=lock_timeout):
        for repo, instances in by_repo.items():
            await anyio.Path(root / repo).parent.mkdir(parents=True, exist_ok=True)
            await _build_repo(root, repo, instances)
    return (await anyio.Path(root).resolve()).as_uri()
