"""The swe_smith_oracle environment: fix a SWE-smith bug; reward from the row's pytest ids."""

from __future__ import annotations

import hashlib
import logging
import random
import shlex
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import attrs
from hermes_protocols import (
    AgentResult,
    ConfigError,
    FailureKind,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
)

from hermes_envs._convert import str_tuple
from hermes_envs.errors import DatasetError
from hermes_envs.shell import run_checked
from hermes_envs.swe_smith.fixtures import fixture_digest, fixture_rows
from hermes_envs.swe_smith.mirror import build_fixture_mirror
from hermes_envs.swe_smith.repo_cache import RepoCache
from hermes_envs.swe_smith.rows import HF_DATASET, SweRow, load_hf, load_jsonl
from hermes_envs.swe_smith.verify import VENV, host_package_tar, run_pytest, score_tests

log = logging.getLogger(__name__)

# Offline (dependency-free fixture repos): put the checkout on the venv's path with a .pth file.
PTH_INSTALL = (
    "{python} -c \"import os, sysconfig; open(os.path.join(sysconfig.get_paths()['purelib'], "
    "'hermes_repo.pth'), 'w').write(os.getcwd() + chr(10))\""
)
ONLINE_INSTALL = "{python} -m pip install -q -e ."
SYSTEM_PROMPT = (
    "You are a software engineer fixing a bug in the Python repository in your current working "
    "directory. Explore the code with your tools, make the smallest correct change, and do not "
    "edit the tests. Reply with a short summary when done."
)


def _default_cache() -> str:
    return str(Path(tempfile.gettempdir()) / "hermes-envs-swe-smith")


@attrs.frozen(slots=True)
class SweSmithConfig:
    """Where rows and repositories come from, how to verify, and the timeouts (seconds).

    ``source``: ``fixtures`` (shipped, offline), ``jsonl`` (``jsonl_path``), ``hf``
    (``hf_dataset``), or ``auto`` (the Hub when reachable, else ``jsonl_path``, else fixtures).
    ``repo_base_url`` defaults to ``https://github.com`` for real rows and to the fixture mirror
    (a ``file://`` URL under ``cache_dir``) for fixtures.
    """

    source: Literal["fixtures", "jsonl", "hf", "auto"] = "fixtures"
    jsonl_path: str | None = None
    hf_dataset: str = HF_DATASET
    hf_split: str = "train"
    hf_cache_dir: str | None = None
    repo_base_url: str | None = None
    cache_dir: str = attrs.field(factory=_default_cache)
    prompt_mode: Literal["problem_statement", "problem_statement+text"] = "problem_statement"
    python: str = "python3"
    pytest_source: Literal["host", "pip", "system"] = "host"
    install_command: str | None = None
    reward: Literal["binary", "shaped"] = "binary"
    restore_tests: bool = True
    test_chunk_size: int = 50
    git_timeout: float = 600.0
    lock_timeout: float = 600.0
    install_timeout: float = 600.0
    test_timeout: float = 600.0
    toolsets: tuple[str, ...] = attrs.field(default=("terminal", "file"), converter=str_tuple)


class SweSmithOracleEnv:
    """Items are SWE-smith rows; reward 1.0 when all FAIL_TO_PASS and PASS_TO_PASS pass."""

    name = "swe_smith_oracle"

    def __init__(self, config: SweSmithConfig | None = None) -> None:
        self.config = config or SweSmithConfig()
        if self.config.source == "jsonl" and not self.config.jsonl_path:
            raise ConfigError("swe_smith_oracle: source='jsonl' needs jsonl_path")
        self._rows: list[SweRow] | None = None
        self._fixture_source = self.config.source == "fixtures"
        self._pytest_tar: bytes | None = None

    @property
    def toolsets(self) -> Sequence[str]:
        return self.config.toolsets

    def load_rows(self) -> list[SweRow]:
        """Load the rows once (blocking for ``hf``/``auto``: call from a worker thread)."""
        if self._rows is None:
            self._rows = self._load()
        return self._rows

    async def aload_rows(self) -> list[SweRow]:
        return await anyio.to_thread.run_sync(self.load_rows)

    def _load(self) -> list[SweRow]:
        cfg = self.config
        if cfg.source == "fixtures":
            return [SweRow.parse(r) for r in fixture_rows()]
        if cfg.source == "jsonl":
            return load_jsonl(Path(str(cfg.jsonl_path)))
        try:
            return load_hf(cfg.hf_dataset, cfg.hf_split, cfg.hf_cache_dir)
        except Exception as exc:
            if cfg.source == "hf":
                raise DatasetError(f"could not load {cfg.hf_dataset}: {exc}") from exc
            log.warning("%s unreachable (%s); falling back", cfg.hf_dataset, exc)
        if cfg.jsonl_path:
            return load_jsonl(Path(cfg.jsonl_path))
        self._fixture_source = True
        return [SweRow.parse(r) for r in fixture_rows()]

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        """Every row once, in an order shuffled by ``seed``."""
        rows = list(self.load_rows())
        random.Random(seed).shuffle(rows)
        for row in rows:
            yield Item(id=row.instance_id, data=row.to_json(), split=split)

    def row(self, item: Item) -> SweRow:
        return SweRow.parse(item.data)

    def prompt(self, item: Item) -> Sequence[Message]:
        row = self.row(item)
        user = f"Fix this issue:\n\n{row.problem_statement}"
        if self.config.prompt_mode == "problem_statement+text" and row.text:
            user += f"\n\nRelevant code:\n\n{row.text}"
        return (Message.system(SYSTEM_PROMPT), Message.user(user))

    def oracle_solution(self, item: Item) -> str:
        """A shell script applying the row's reference patch with ``git apply``."""
        patch = self.row(item).patch
        if patch is None:
            raise DatasetError(f"{item.id}: the row has no oracle patch")
        return f"git apply --whitespace=nowarn <<'HERMES_PATCH'\n{patch}HERMES_PATCH\n"

    async def _base_url(self) -> str:
        if self.config.repo_base_url:
            return self.config.repo_base_url
        if self._fixture_source:
            mirror = Path(self.config.cache_dir) / f"mirror-{fixture_digest()}"
            return await build_fixture_mirror(mirror, lock_timeout=self.config.lock_timeout)
        return "https://github.com"

    async def _cache(self) -> RepoCache:
        base_url = await self._base_url()
        url_key = hashlib.sha256(base_url.encode()).hexdigest()[:12]
        return RepoCache(
            Path(self.config.cache_dir) / "repos" / url_key,
            base_url,
            git_timeout=self.config.git_timeout,
            lock_timeout=self.config.lock_timeout,
        )

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        """The repository at the row's ref, committed as ``base``; the metadata (JSON only,
        it goes into every record) names the repository and ref."""
        row = self.row(item)
        tar = await (await self._cache()).checkout_tar(row.repo, row.ref)
        await slot.write_file(".hermes_repo.tar", tar)
        git = "git -c user.name=hermes -c user.email=hermes@example.invalid"
        await run_checked(
            slot,
            "tar -xf .hermes_repo.tar && rm -f .hermes_repo.tar && git init -q && "
            f"{git} add -A && {git} commit -qm base",
            timeout=self.config.git_timeout,
            what="unpacking the repository",
        )
        return {"repo": row.repo, "ref": row.ref}

    async def _pytest_bundle(self) -> bytes:
        if self._pytest_tar is None:
            self._pytest_tar = await anyio.to_thread.run_sync(host_package_tar, "pytest")
        return self._pytest_tar

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        cfg = self.config
        row = self.row(item)
        if cfg.restore_tests:  # the test files as the row's ref has them, from the host cache
            wanted = [n.split("::", 1)[0] for n in (*row.fail_to_pass, *row.pass_to_pass)]
            for path, data in (
                await (await self._cache()).read_files(row.repo, row.ref, wanted)
            ).items():
                await ctx.write_file(path, data)
        python = f"{VENV}/bin/python"
        template = cfg.install_command or (PTH_INSTALL if self._fixture_source else ONLINE_INSTALL)
        flags = " --system-site-packages" if cfg.pytest_source == "system" else ""
        if cfg.pytest_source != "pip" and "pip" not in template:
            flags += " --without-pip"
        venv = await ctx.exec(f"{cfg.python} -m venv{flags} {VENV}", timeout=cfg.install_timeout)
        if not venv.ok:
            return _infra(f"creating the venv failed: {venv.stderr[-1000:]}")
        if cfg.pytest_source == "host":
            await ctx.write_file(".hermes_pytest.tar", await self._pytest_bundle())
            step = (
                f"site=$({python} -c 'import sysconfig; print(sysconfig.get_paths()"
                '["purelib"])\') && tar -xf .hermes_pytest.tar -C "$site" && '
                "rm -f .hermes_pytest.tar"
            )
        else:
            step = f"{python} -m pip install -q pytest" if cfg.pytest_source == "pip" else "true"
        provisioned = await ctx.exec(step, timeout=cfg.install_timeout)
        if not provisioned.ok:
            return _infra(f"installing pytest failed: {provisioned.stderr[-1000:]}")
        install = await ctx.exec(
            template.format(python=shlex.quote(python)), timeout=cfg.install_timeout
        )
        if install.timed_out:
            return _infra(f"installing the repository timed out after {cfg.install_timeout:g}s")
        if not install.ok:
            return Score(
                reward=0.0,
                metrics={"solved": 0.0, "install_failed": 1.0},
                failure=FailureKind.MODEL,
                details=f"installing the repository failed: {install.stderr[-1000:]}",
            )
        outcome = await run_pytest(
            ctx,
            [*row.fail_to_pass, *row.pass_to_pass],
            chunk_size=cfg.test_chunk_size,
            timeout=cfg.test_timeout,
        )
        return score_tests(
            outcome, row.fail_to_pass, row.pass_to_pass, shaped=cfg.reward == "shaped"
        )


def _infra(details: str) -> Score:
    return Score(reward=0.0, failure=FailureKind.INFRASTRUCTURE, details=details)
