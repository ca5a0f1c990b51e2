"""The CLI end to end with a scripted rollout source: parsing, checks, defaults, exit codes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from hermes_atropos_env.cli import main
from hermes_atropos_env.wiring import HermesWiring
from hermes_protocols import SandboxError


class FakeWiring:
    def __init__(self, tokenizer_dir: Path, source) -> None:
        self._dir = tokenizer_dir
        self._source = source

    def problems(self, env, inference) -> list[str]:
        return HermesWiring().problems(env, inference)  # the real spec checks

    def tokenizer_dir(self, env, inference) -> str:
        return str(self._dir)

    @property
    def source_factory(self):
        return self._source.factory


def test_process_through_the_cli_writes_groups_and_html(
    tmp_path, tokenizer_dir, make_rollout, scripted_source, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    source = scripted_source(lambda item, size: [make_rollout(item=item) for _ in range(size)])
    argv = ["process", "--env.total_steps", "2", "--env.group_size", "2", "--env.use_wandb", "true"]
    assert main(argv, wiring=FakeWiring(tokenizer_dir, source)) == 0
    err = capsys.readouterr().err
    assert "notice: wandb disabled" in err
    assert "wandb=off" in err
    out = tmp_path / "runs" / "atropos" / "hermes_endless_terminals.jsonl"
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(g["tokens"]) for g in groups] == [2, 2]
    assert out.with_suffix(".html").is_file()
    report = out.with_suffix(".report.html").read_text()  # hermes-report, beside it
    assert "wrote runs/atropos/hermes_endless_terminals.report.html" in err
    assert report.count('<script type="application/json" id="d') == 4  # 2 groups of 2
    assert '"src":"sampler"' in report


def test_process_without_options_runs_a_few_groups_and_says_so(
    tmp_path, tokenizer_dir, make_rollout, scripted_source, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    source = scripted_source(lambda item, size: [make_rollout(item=item) for _ in range(size)])
    assert main(["process"], wiring=FakeWiring(tokenizer_dir, source)) == 0
    assert [size for _, size in source.groups_run] == [4, 4]
    out = "runs/atropos/hermes_endless_terminals.jsonl"
    assert f"process: 2 groups of 4 rollouts (--env.total_steps, --env.group_size) into {out}" in (
        capsys.readouterr().err
    )
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]  # nothing else in the working tree


class _UnreachableSource:
    """A rollout source that cannot open (as a Nomad cluster that does not answer)."""

    def factory(self, *_: object) -> object:
        @asynccontextmanager
        async def opened() -> AsyncIterator[None]:
            raise SandboxError("Nomad at http://127.0.0.1:9 unreachable")
            yield

        return opened()


def test_a_failed_process_leaves_no_empty_output_directories(
    tmp_path, tokenizer_dir, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["process"], wiring=FakeWiring(tokenizer_dir, _UnreachableSource())) == 1
    assert "Nomad at http://127.0.0.1:9 unreachable" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_bad_config_exits_2_before_anything_starts(
    tmp_path, make_rollout, scripted_source, capsys
) -> None:
    source = scripted_source(lambda item, size: [])
    code = main(
        ["serve", "--env.environment", "nope", "--env.group_size", "4", "--env.batch_size", "2"],
        wiring=FakeWiring(tmp_path, source),
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "set --env.environment to one of endless_terminals" in err
    assert "lower group_size or raise batch_size" in err
    assert source.opened == 0


def test_help_lists_the_options(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--env.max_tokens_per_turn" in out
    assert "--openai.server_type" in out
