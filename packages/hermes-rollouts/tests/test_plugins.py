"""The environment resolver: names, entry points, modules and files, and one line per mistake."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hermes_protocols import ConfigError, Environment
from hermes_rollouts import (
    ENTRY_POINT_GROUP,
    EnvironmentSpec,
    PluginError,
    RolloutSpec,
    available_environments,
    build_environment,
    check_spec,
    environment_names,
    environments_text,
    resolve_environment,
    validate,
)

ENV_SOURCE = '''
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import AgentResult, Item, Message, RewardContext, Score, Slot


@attrs.frozen
class CountConfig:
    """How many lines."""

    lines: int = 3


class CountEnv:
    """Count the lines of a file."""

    name = "count_lines"
    toolsets = ("terminal",)

    def __init__(self, config: CountConfig) -> None:
        self.config = config

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        for n in itertools.count():
            yield Item(id=f"{split}-{seed}-{n}", data={"lines": self.config.lines}, split=split)

    def prompt(self, item: Item) -> Sequence[Message]:
        return [Message.user("Write the line count of in.txt to out.txt.")]

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        await slot.write_file("in.txt", b"x\\n" * item.data["lines"])
        return {}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        try:
            got = (await ctx.read_file("out.txt")).decode().strip()
        except FileNotFoundError:
            got = ""
        return Score(reward=float(got == str(item.data["lines"])))

    def oracle_solution(self, item: Item) -> str:
        return "wc -l < in.txt > out.txt"
'''


def _write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    return _write(tmp_path / "outside" / "my_env.py", ENV_SOURCE)


def test_a_file_outside_the_project_resolves_with_typed_options(env_file: Path) -> None:
    plugin = resolve_environment(f"{env_file}:CountEnv")
    assert plugin.spec.name == "count_lines"
    assert plugin.spec.description == "Count the lines of a file."
    assert plugin.origin == f"file {env_file}"
    assert plugin.spec.config_type.__name__ == "CountConfig"
    env = plugin.create({"lines": 7})
    assert isinstance(env, Environment)
    assert next(env.items(seed=0)).data == {"lines": 7}
    # the same file twice is the same module (its classes stay the same objects)
    again = resolve_environment(f"{env_file}:CountEnv")
    assert again.spec.factory is plugin.spec.factory


def test_options_errors_name_the_users_option(env_file: Path) -> None:
    plugin = resolve_environment(f"{env_file}:CountEnv")
    with pytest.raises(ConfigError) as bad_type:
        plugin.create({"lines": "many"}, option="--env-options")
    assert "expected int @ --env-options.lines" in str(bad_type.value)
    with pytest.raises(ConfigError) as extra:
        plugin.create({"line": 2}, option="--env.environment_options")
    assert "extra fields found (line) @ --env.environment_options" in str(extra.value)


def test_module_targets_env_specs_factories_and_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path / "site" / "counting.py",
        ENV_SOURCE
        + textwrap.dedent('''
        from hermes_envs import EnvSpec

        SPEC = EnvSpec("counting", CountConfig, CountEnv, "counting, as an EnvSpec")
        READY = CountEnv(CountConfig(lines=2))

        def make() -> CountEnv:
            """A factory without options."""
            return CountEnv(CountConfig(lines=5))
    '''),
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = resolve_environment("counting:SPEC")
    assert (spec.spec.name, spec.spec.description) == ("counting", "counting, as an EnvSpec")
    assert next(spec.create({"lines": 4}).items(seed=0)).data == {"lines": 4}
    ready = resolve_environment("counting:READY")
    assert not ready.takes_options
    assert next(ready.create().items(seed=0)).data == {"lines": 2}
    factory = resolve_environment("counting:make")
    assert factory.spec.description == "A factory without options."
    assert next(factory.create({}).items(seed=0)).data == {"lines": 5}
    with pytest.raises(ConfigError, match=r"^--env-options: environment 'make' takes no options"):
        factory.create({"lines": 1}, option="--env-options")


def _error(reference: str, option: str = "--env") -> str:
    with pytest.raises(PluginError) as caught:
        resolve_environment(reference, option=option).create()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_each_bad_reference_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _write(site / "needs_numpyish.py", "import not_installed_dependency_x\n")
    _write(
        site / "shapes.py",
        """
        import socket
        import attrs

        class Config:
            def __init__(self, n: int) -> None:
                self.n = n

        @attrs.frozen
        class SocketConfig:
            sock: socket.socket

        class Base:
            name = "shapes"
            toolsets = ("terminal",)
            def items(self, *, seed, split="train"): return iter(())
            def prompt(self, item): return []
            async def setup_workspace(self, item, slot): return {}
            async def verify(self, item, result, ctx): ...

        class NoItems:
            name = "x"
            def prompt(self, item): return []

        class PlainConfigEnv(Base):
            def __init__(self, config: Config) -> None: ...

        class SocketEnv(Base):
            def __init__(self, config: SocketConfig) -> None: ...

        class SyncSetup(Base):
            def setup_workspace(self, item, slot): return {}

        class Untyped(Base):
            def __init__(self, config) -> None: ...

        NOT_AN_ENV = object()
    """,
    )
    monkeypatch.syspath_prepend(str(site))
    expectations = {
        "no_such_module_q:Env": "--env: no module named 'no_such_module_q'",
        "needs_numpyish:Env": "imports 'not_installed_dependency_x', which is not installed",
        f"{tmp_path}/missing.py:Env": f"--env: no file '{tmp_path}/missing.py'",
        "shapes:Nope": "--env: module shapes has no attribute 'Nope' (it defines: Base, Config",
        "shapes:NoItems": "class NoItems lacks items, setup_workspace, verify",
        "shapes:NOT_AN_ENV": "is not an environment: object lacks name, toolsets, items",
        "shapes:SyncSetup": "SyncSetup.setup_workspace must be async def",
        "shapes:PlainConfigEnv": "config type Config is not an attrs class or dataclass",
        "shapes:SocketEnv": "cattrs cannot structure options into shapes:SocketEnv's config",
        "shapes:Untyped": "takes 'config' without a type annotation",
        "nope": "unknown environment 'nope': set --env to one of endless_terminals",
    }
    for reference, expected in expectations.items():
        assert expected in _error(reference), reference
    assert _error("nope", "--env.environment").startswith(
        "unknown environment 'nope': set --env.environment to one of"
    )


def test_installed_packages_register_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    _write(site / "counting_pkg" / "__init__.py", ENV_SOURCE)
    info = site / "counting_pkg-1.0.dist-info"
    _write(info / "METADATA", "Metadata-Version: 2.1\nName: counting-pkg\nVersion: 1.0\n")
    _write(
        info / "entry_points.txt",
        f"[{ENTRY_POINT_GROUP}]\ncount_lines = counting_pkg:CountEnv\n"
        "broken_env = counting_pkg_missing:Env\nendless_terminals = counting_pkg:CountEnv\n",
    )
    monkeypatch.syspath_prepend(str(site))
    assert {"count_lines", "broken_env"} <= set(environment_names())
    plugin = resolve_environment("count_lines")
    assert plugin.origin == "entry point counting_pkg:CountEnv"
    assert next(plugin.create({"lines": 1}).items(seed=0)).data == {"lines": 1}
    # a shipped name wins over an installed one
    assert resolve_environment("endless_terminals").origin == "shipped"
    listed = {(info.name, info.origin): info.description for info in available_environments()}
    assert listed["count_lines", plugin.origin] == "Count the lines of a file."
    broken = listed["broken_env", "entry point counting_pkg_missing:Env"]
    assert broken.startswith("cannot be loaded: --env: the entry point")
    assert ("endless_terminals", "shipped") in listed
    text = environments_text()
    assert "count_lines" in text
    assert "[entry point counting_pkg:CountEnv]" in text
    assert "ignored: a shipped environment has this name" in text


def test_build_environment_reports_every_problem_in_the_callers_names(env_file: Path) -> None:
    spec = EnvironmentSpec(
        name=f"{env_file}:CountEnv", options={"lines": "x"}, prefill_messages="/nonexistent.json"
    )
    names = {"environment.options": "--env-options", "environment.prefill_messages": "--prefill"}
    with pytest.raises(ConfigError) as caught:
        build_environment(spec, names)
    message = str(caught.value)
    assert "--env-options: bad config for environment 'count_lines'" in message
    assert "--prefill: " in message


COUNTING = (
    ENV_SOURCE
    + '''

from pathlib import Path


def make() -> CountEnv:
    """Counts how often it is called, in a file beside this one."""
    calls = Path(__file__).with_suffix(".calls")
    calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
    return CountEnv(CountConfig())
'''
)


def test_a_start_resolves_and_builds_its_environment_once(tmp_path: Path) -> None:
    path = _write(tmp_path / "counting_env.py", COUNTING)
    spec = RolloutSpec(environment=EnvironmentSpec(name=f"{path}:make"))
    check = check_spec(spec)
    assert check.problems == ()
    assert path.with_suffix(".calls").read_text() == "x"
    # what open_session does with the environment the app's validation built
    assert validate(spec, environment=check.environment) is check.environment
    assert path.with_suffix(".calls").read_text() == "x"
    validate(spec)  # without it: built again
    assert path.with_suffix(".calls").read_text() == "xx"
