"""The CLI end to end with a scripted rollout source: parsing, checks, defaults, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_atropos_env.cli import main
from hermes_atropos_env.wiring import HermesWiring


class FakeWiring:
    def __init__(self, tokenizer_dir: Path, source) -> None:
        self._dir = tokenizer_dir
        self._source = source

    def problems(self, env, inference) -> list[str]:
        return HermesWiring().problems(env, inference)  # the real spec checks

    def tokenizer_dir(self, inference) -> str:
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
    out = tmp_path / "data" / "hermes_endless_terminals.jsonl"
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(g["tokens"]) for g in groups] == [2, 2]
    assert out.with_suffix(".html").is_file()
    report = out.with_suffix(".report.html").read_text()  # hermes-report, beside it
    assert "wrote data/hermes_endless_terminals.report.html" in err
    assert report.count('<script type="application/json" id="d') == 4  # 2 groups of 2
    assert '"src":"sampler"' in report


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
