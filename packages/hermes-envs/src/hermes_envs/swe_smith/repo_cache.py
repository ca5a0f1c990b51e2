"""Bare-repository cache with one git worktree per rollout (cache updates under a file lock).

The worktree is packed as a tar stream and unpacked in the slot, so the same code serves local,
container and remote slots; the worktree is removed again as soon as it is packed. Single files
(the tests a verifier restores) are read straight from the bare repository.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import anyio

from hermes_envs.errors import SetupError
from hermes_envs.swe_smith.gitops import file_lock, git


class RepoCache:
    """``<cache_dir>/<owner>__<name>.git`` bare clones of ``<base_url>/<owner>/<name>.git``."""

    def __init__(
        self, cache_dir: Path, base_url: str, *, git_timeout: float, lock_timeout: float
    ) -> None:
        self.cache_dir = cache_dir
        self.base_url = base_url.rstrip("/")
        self.git_timeout = git_timeout
        self.lock_timeout = lock_timeout

    def bare_path(self, repo: str) -> Path:
        return self.cache_dir / (repo.replace("/", "__") + ".git")

    async def _has(self, bare: Path, ref: str) -> bool:
        try:
            await git(["rev-parse", "--verify", "-q", f"{ref}^{{commit}}"], cwd=bare, timeout=60)
        except SetupError:
            return False
        return True

    async def ensure(self, repo: str, ref: str) -> Path:
        """Clone or fetch ``repo`` into the cache until ``ref`` resolves; return the bare path."""
        bare = self.bare_path(repo)
        url = f"{self.base_url}/{repo}.git"
        await anyio.Path(self.cache_dir).mkdir(parents=True, exist_ok=True)
        async with file_lock(Path(f"{bare}.lock"), timeout=self.lock_timeout):
            if not (bare / "HEAD").exists():
                staging = Path(f"{bare}.partial")
                await anyio.run_process(["rm", "-rf", str(staging)])
                await git(["clone", "-q", "--bare", url, str(staging)], timeout=self.git_timeout)
                await anyio.Path(staging).rename(bare)
            if not await self._has(bare, ref):
                await git(
                    ["fetch", "-q", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                    cwd=bare,
                    timeout=self.git_timeout,
                )
            if not await self._has(bare, ref):
                raise SetupError(f"{repo}: ref {ref!r} not found at {url}")
        return bare

    async def checkout_tar(self, repo: str, ref: str) -> bytes:
        """A tar stream of ``repo`` at ``ref`` made from a fresh per-rollout worktree."""
        bare = await self.ensure(repo, ref)
        lock = Path(f"{bare}.lock")
        worktree = self.cache_dir / "worktrees" / uuid.uuid4().hex
        await anyio.Path(worktree.parent).mkdir(parents=True, exist_ok=True)
        async with file_lock(lock, timeout=self.lock_timeout):
            await git(["worktree", "add", "-q", "--detach", str(worktree), ref], cwd=bare)
        try:
            result = await anyio.run_process(
                ["tar", "-C", str(worktree), "--exclude=./.git", "-cf", "-", "."], check=False
            )
            if result.returncode != 0:
                raise SetupError(f"packing {repo}@{ref} failed: {result.stderr.decode()[-500:]}")
            return bytes(result.stdout)
        finally:
            with anyio.CancelScope(shield=True):
                async with file_lock(lock, timeout=self.lock_timeout):
                    await git(["worktree", "remove", "--force", str(worktree)], cwd=bare)

    async def read_files(self, repo: str, ref: str, paths: Sequence[str]) -> dict[str, bytes]:
        """The files of ``paths`` that exist as files in ``repo`` at ``ref`` (others skipped),
        read from the bare repository with one ``git cat-file --batch``."""
        bare = await self.ensure(repo, ref)
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        query = "".join(f"{ref}:{path}\n" for path in wanted).encode()
        try:
            with anyio.fail_after(self.git_timeout):
                done = await anyio.run_process(
                    ["git", "cat-file", "--batch"], input=query, cwd=bare, check=False
                )
        except TimeoutError:
            raise SetupError(f"reading files of {repo}@{ref} timed out") from None
        if done.returncode != 0:
            raise SetupError(f"reading files of {repo}@{ref} failed: {done.stderr.decode()[-500:]}")
        return _parse_batch(bytes(done.stdout), wanted)


def _parse_batch(out: bytes, paths: Sequence[str]) -> dict[str, bytes]:
    """``git cat-file --batch`` output, one answer per path: ``<oid> <type> <size>\\n<data>\\n``
    or ``<name> missing\\n``; only blobs are kept."""
    found: dict[str, bytes] = {}
    pos = 0
    for path in paths:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if header[-1] in (b"missing", b"ambiguous"):
            continue
        size = int(header[2])
        if header[1] == b"blob":
            found[path] = out[pos : pos + size]
        pos += size + 1
    return found
