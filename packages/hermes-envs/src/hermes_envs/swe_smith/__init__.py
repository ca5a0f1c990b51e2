"""swe_smith_oracle: SWE-smith bug-fix tasks verified by the rows' pytest node ids."""

from hermes_envs.swe_smith.env import SweSmithConfig, SweSmithOracleEnv
from hermes_envs.swe_smith.fixtures import FIXTURES, FixtureInstance, fixture_rows
from hermes_envs.swe_smith.mirror import build_fixture_mirror
from hermes_envs.swe_smith.repo_cache import RepoCache
from hermes_envs.swe_smith.rows import SweRow, load_jsonl

__all__ = [
    "FIXTURES",
    "FixtureInstance",
    "RepoCache",
    "SweRow",
    "SweSmithConfig",
    "SweSmithOracleEnv",
    "build_fixture_mirror",
    "fixture_rows",
    "load_jsonl",
]
